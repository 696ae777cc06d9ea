// Several processes (torchrun ranks, fork children) reported together: a summary per rank, the
// imbalance between the heaviest and the lightest, and the call sites that explain it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpumemshim/analyzer/model.h"

namespace gpumemshim::analyzer {

struct LoadedTrace;
struct Report;
class StackView;

// What one symbolized call site held when its process peaked (same id as leaks and growth).
struct SiteBytes {
  std::string id;
  uint64_t bytes = 0;
  Api api = Api::kUnknown;
  std::vector<Frame> stack;
};

// A finding of one rank, by reference: kind "leak" | "growth" | "failed_allocation".
struct RankFinding {
  std::string kind;
  std::string id;      // site id; for failed allocations the api name
  uint64_t bytes = 0;  // leaked bytes, growth bytes per step, or bytes asked for
};

struct RankEntry {
  int64_t rank = -1;  // -1: the process had no rank in its environment
  uint64_t pid = 0;
  std::string host;
  size_t process = 0;  // index into Report::processes
  uint64_t peak_bytes = 0;
  uint64_t leaked_bytes = 0;
  int64_t growth_bytes_per_step = 0;  // sum over the rank's growing sites (step-based fits)
  std::vector<RankFinding> findings;
};

struct SiteDiff {
  std::string id;
  int64_t bytes_diff = 0;  // heaviest's bytes at its peak minus lightest's at its peak
  uint64_t heaviest_bytes = 0;
  uint64_t lightest_bytes = 0;
  std::vector<Frame> stack;
};

struct Ranks {
  std::vector<RankEntry> per_rank;  // by rank, then pid; empty with fewer than 2 processes
  size_t heaviest = 0;              // indexes into per_rank
  size_t lightest = 0;
  std::vector<SiteDiff> sites;      // bytes_diff descending, positive only, at most kMaxSites
  static constexpr size_t kMaxSites = 10;
  bool present() const { return per_rank.size() >= 2; }
};

// The symbolized sites a trace's process held at its device-memory peak, bytes descending.
std::vector<SiteBytes> sites_at_peak(const LoadedTrace& trace, StackView& stacks);

// Needs every process's report (peak_sites included).
Ranks compute_ranks(const Report& report);

// The "ranks" block of the JSON report (docs/report-json.md), and the text report's section.
nlohmann::json ranks_json(const Report& report);
std::string ranks_text(const Report& report);

}  // namespace gpumemshim::analyzer

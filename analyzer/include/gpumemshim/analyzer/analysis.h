// The top of the analyzer: several traces (one per process) → one report model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gpumemshim/analyzer/load.h"
#include "gpumemshim/analyzer/model.h"
#include "gpumemshim/analyzer/suppressions.h"

namespace gpumemshim::analyzer {

// A group of surviving allocations that share a call site (symbolized stack + api + memory kind).
struct SiteGroup {
  std::string id;            // stable short hex hash of the symbolized stack + api
  std::string kind;          // "leak", "cached" (a caching allocator's segment in a trace with
                             // torch events: not a leak, not in leaked_bytes); "leak" (DESIGN §8 (c)); later: "retained", "growth", ...; for
                             // address space: "unreleased"
  uint64_t bytes = 0;
  uint64_t count = 0;
  Api api = Api::kUnknown;
  MemoryKind memory = MemoryKind::kDevice;
  bool torch_block = false;  // PyTorch tensor blocks: api "torch.alloc", memory "torch_block"
  int32_t device = 0;        // -1 when the group spans several devices
  uint64_t pid = 0;
  uint64_t first_time_ns = 0;
  std::vector<Frame> stack;  // innermost user frame first
  bool suppressed = false;
  std::string suppressed_by;  // the pattern
};

struct Failure {
  FailureEvent event;
  uint64_t pid = 0;
  std::vector<Frame> stack;
};

struct ProcessReport {
  std::string trace;
  ProcessInfo info;
  std::vector<DeviceInfo> devices;
  std::vector<std::pair<std::string, std::string>> attributes;
  TraceStats stats;
  Summary summary;
  bool truncated = false;
  uint64_t truncated_at = 0;
  bool clean_exit = false;
  double duration_s = 0;
  std::vector<SiteGroup> leaks;          // bytes descending; suppressed ones included (flagged)
  std::vector<SiteGroup> address_space;  // unreleased mappings / reservations
  std::vector<Failure> failures;         // in time order
  std::vector<MarkerEvent> markers;      // in time order; the earliest MarkerLog::kKeep
  uint64_t markers_dropped = 0;          // markers not kept (beyond MarkerLog::kKeep)
};

struct Report {
  std::vector<ProcessReport> processes;
  // Sums over processes. peak_bytes is the sum of per-process peaks (an upper bound of the
  // simultaneous peak: processes are not aligned in time).
  Summary summary;
  std::vector<Suppression> suppressions_used;  // with hit counts, when suppressions were given
};

struct AnalyzeOptions {
  const Suppressions* suppressions = nullptr;
  size_t max_frames = 32;
};

// Throws TraceError for an unusable trace.
Report analyze(const std::vector<std::string>& paths, const AnalyzeOptions& options = {});
ProcessReport analyze_trace(const LoadedTrace& trace, const AnalyzeOptions& options,
                            Suppressions* suppressions);

// All leaks of a report (every process), bytes descending.
std::vector<const SiteGroup*> all_leaks(const Report& report, bool include_suppressed);

}  // namespace gpumemshim::analyzer

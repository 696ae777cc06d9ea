// `gpumemshim diff BASE NEW`: what changed between two runs, from their JSON reports
// (docs/report-json.md): peak and leaked bytes, and per call site (matched by site id, which
// depends only on the symbolized stack and api, so it is the same in both runs) the bytes leaked
// and the bytes alive at the peak (processes[].timeline.peak.sites).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpumemshim::analyzer {

inline constexpr const char* kDiffSchema = "gpumemshim-diff/1";

struct SiteChange {
  std::string id;
  std::string what;  // "leak": leaked bytes; "peak": bytes alive at the process's peak
  uint64_t base_bytes = 0;
  uint64_t new_bytes = 0;
  std::string label;  // "file:line" of the innermost user frame
  nlohmann::json stack = nlohmann::json::array();
  int64_t delta() const { return static_cast<int64_t>(new_bytes) - static_cast<int64_t>(base_bytes); }
};

struct ReportDiff {
  std::vector<std::string> base_traces, new_traces;
  uint64_t base_peak = 0, new_peak = 0;
  uint64_t base_leaked = 0, new_leaked = 0;
  bool peak_sites_known = false;    // both reports had per-process timelines
  std::vector<SiteChange> worse;    // largest growth first
  std::vector<SiteChange> better;   // largest shrink first
  size_t new_leak_sites = 0;        // leak sites absent from the base
};

ReportDiff diff_reports(const nlohmann::json& base, const nlohmann::json& next);

// Growth in percent; nullopt when base is 0 and new is not (infinitely worse).
std::optional<double> change_pct(uint64_t base, uint64_t next);
// True when peak or leaked bytes grew by more than pct percent, or a leak site appeared.
bool is_regression(const ReportDiff& d, double pct);

nlohmann::json diff_json(const ReportDiff& d, std::optional<double> fail_pct);
std::string diff_text(const ReportDiff& d, std::optional<double> fail_pct);

}  // namespace gpumemshim::analyzer

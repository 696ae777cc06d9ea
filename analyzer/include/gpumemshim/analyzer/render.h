// Every writer of the analyzer. The report writers render the typed Report (report.h); the exports
// and stats read the traces themselves (they show events, not findings).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

// ---- the report ----

// Greppable lines with exact bytes, in the spirit of LeakSanitizer.
std::string report_text(const Report& report);
// Only the unsuppressed leaks (and the suppression summary): what `check` prints on failure.
std::string leaks_text(const Report& report);
// docs/report-json.md; processes[i].timeline where the analysis made timelines.
nlohmann::json report_json(const Report& report);
// One self-contained page (inline CSS and SVG): the sections of the JSON report, and a chart of
// each process's timeline.
std::string report_html(const Report& report);

// A JSON value as the CLI writes it: invalid UTF-8 from a trace replaced, a newline at the end.
std::string json_text(const nlohmann::json& value, int indent = 2);

// ---- CI outputs of `check` ----

// What makes `check` fail, so that the CI outputs agree with its exit code.
struct FailPolicy {
  bool leaks_over_limit = false;  // summary.leaked_bytes > --max-leak-bytes
  std::optional<double> max_growth_bytes_per_step;  // unset: growth never fails
  // --allow-incomplete: traces that are not clean are reported, not failed.
  bool allow_incomplete = false;
};

// JUnit XML (the Surefire/Jenkins dialect): one testcase per finding, failing where the finding
// fails `check`, and one passing testcase when nothing fails. Traces that are not clean give a
// testcase "trace integrity", failing unless policy.allow_incomplete.
std::string report_junit(const Report& report, const FailPolicy& policy);
// SARIF 2.1.0: one result per finding, located at its innermost user frame, the whole stack as a
// code flow. Each trace that is not clean is a tool execution notification of level "error"
// (runs[0].invocations[0].toolExecutionNotifications); the report's notes are level "note".
nlohmann::json report_sarif(const Report& report, const FailPolicy& policy);

// ---- `gpumemshim diff BASE NEW` ----

inline constexpr const char* kDiffSchema = "gpumemshim-diff/1";

// A call site (matched by id: it depends only on the symbolized stack and api, so it is the same
// in both runs) whose bytes changed.
struct SiteChange {
  std::string id;
  std::string what;  // "leak": leaked bytes; "peak": bytes alive at the process's peak
  uint64_t base_bytes = 0;
  uint64_t new_bytes = 0;
  std::string label;  // "file:line" of the innermost user frame
  std::vector<Frame> stack;
  int64_t delta() const { return static_cast<int64_t>(new_bytes) - static_cast<int64_t>(base_bytes); }
};

struct ReportDiff {
  std::vector<std::string> base_traces, new_traces;
  Verdict base_integrity, new_integrity;  // whether each side can be trusted
  uint64_t base_peak = 0, new_peak = 0;
  uint64_t base_leaked = 0, new_leaked = 0;
  bool peak_sites_known = false;    // both reports had per-process timelines
  std::vector<SiteChange> worse;    // largest growth first
  std::vector<SiteChange> better;   // largest shrink first
  size_t new_leak_sites = 0;        // leak sites absent from the base
};

// Peak and leaked bytes, and per call site the bytes leaked and (with timelines in both reports)
// the bytes alive at each process's peak.
ReportDiff diff_reports(const Report& base, const Report& next);
// Growth in percent; nullopt when base is 0 and new is not (infinitely worse).
std::optional<double> change_pct(uint64_t base, uint64_t next);
// True when peak or leaked bytes grew by more than pct percent, or a leak site appeared.
bool is_regression(const ReportDiff& d, double pct);
nlohmann::json diff_json(const ReportDiff& d, std::optional<double> fail_pct);
std::string diff_text(const ReportDiff& d, std::optional<double> fail_pct);

// ---- exports and stats (from the traces) ----

// Chrome / Perfetto trace-event JSON ({"traceEvents": [...]}, timestamps in µs): counter tracks for
// live device bytes (total, per top site, PyTorch reserved/allocated), instant events for marks,
// steps, failed allocations and OOMs, B/E slices for ranges. Several traces are aligned on their
// wall-clock start. Throws TraceError.
nlohmann::json chrome_trace(const std::vector<std::string>& paths);

// PyTorch's memory snapshot format (torch.cuda.memory._snapshot(), pickled), so the trace opens in
// https://pytorch.org/memory_viz and torch.cuda._memory_viz: "segments" (the state at the end:
// PyTorch's segments and blocks when the trace has the torch bridge's events, else every live
// runtime allocation as a segment holding one block) and "device_traces" (per device, the last
// kMaxMemvizTraceEntries events with their frames).
inline constexpr size_t kMaxMemvizTraceEntries = 100000;  // per device, like a typical
                                                          // _record_memory_history(max_entries)
// The snapshot as JSON (dicts, lists, ints, strings). Throws TraceError.
nlohmann::json memviz_snapshot(const std::string& path);
// A pickle (protocol 2) of a JSON value: objects → dict, arrays → list, strings → str (invalid
// UTF-8 replaced), integers → int, floats → float, booleans, null → None.
std::string to_pickle(const nlohmann::json& value);

// Record counts and sizes per trace, for `gpumemshim stats`. Throws TraceError.
std::string stats_text(const std::vector<std::string>& paths);

}  // namespace gpumemshim::analyzer

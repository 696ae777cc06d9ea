// The findings of a JSON report (docs/report-json.md) flattened for CI outputs: one entry per leak
// site, growth site, fragmentation OOM, failed allocation and unreleased mapping, each saying
// whether it fails `check`. JUnit and SARIF are both written from this list.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpumemshim::analyzer {

// What makes `check` fail, so that the CI outputs agree with its exit code.
struct FailPolicy {
  bool leaks_over_limit = false;  // summary.leaked_bytes > --max-leak-bytes
  std::optional<double> max_growth_bytes_per_step;  // unset: growth never fails
};

struct Finding {
  std::string rule;     // "leak", "cached", "retained", "growth", "fragmentation", "oom", "unreleased"
  std::string id;       // site id, or "<pid>:<device>" / "<pid>:<n>" where there is no site
  std::string title;    // one line: "leak: 4.00 MiB in 2 allocations at app.cpp:12"
  std::string message;  // sentences with the numbers (bytes) and the reason
  uint64_t bytes = 0;
  bool fails = false;   // this finding makes `check` fail
  bool suppressed = false;
  std::string suppressed_by;
  nlohmann::json stack = nlohmann::json::array();  // report frames, innermost first
  std::vector<std::string> advice;                 // recommendations that name this finding
};

std::vector<Finding> ci_findings(const nlohmann::json& report, const FailPolicy& policy);

// The first frame of a report stack with a file and a line (the innermost user frame), or null.
const nlohmann::json* user_frame(const nlohmann::json& stack);
// "file:line" of user_frame, else the first frame's function, else "unknown site".
std::string site_label(const nlohmann::json& stack);
// One frame per line: "    #0 function file:line (module)".
std::string stack_text(const nlohmann::json& stack);

}  // namespace gpumemshim::analyzer

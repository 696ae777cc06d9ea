// The findings of a report flattened for CI outputs: one entry per leak site, growth site,
// fragmentation OOM, failed allocation and unreleased mapping, each saying whether it fails
// `check`. JUnit and SARIF are both written from this list.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gpumemshim/analyzer/render.h"
#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

struct Finding {
  std::string rule;     // "leak", "cached", "retained", "library", "alive", "growth",
                        // "fragmentation", "oom", "unreleased"
  std::string id;       // site id, or "<pid>:<device>" / "<pid>:<n>" where there is no site
  std::string title;    // one line: "leak: 4.00 MiB in 2 allocations at app.cpp:12"
  std::string message;  // sentences with the numbers (bytes) and the reason
  uint64_t bytes = 0;
  bool fails = false;   // this finding makes `check` fail
  bool suppressed = false;
  std::string suppressed_by;
  std::vector<Frame> stack;         // innermost first
  std::vector<std::string> advice;  // recommendations that name this finding
};

// In the order of the JSON report's lists: leaks, growth, fragmentation OOMs, failures,
// unreleased address space.
std::vector<Finding> ci_findings(const Report& report, const FailPolicy& policy);

}  // namespace gpumemshim::analyzer

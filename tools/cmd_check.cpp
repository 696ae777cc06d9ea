#include <stdexcept>

#include <fmt/format.h>

#include "ci_outputs.h"
#include "cli.h"
#include "gpumemshim/analyzer/analysis.h"
#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::cli {

namespace an = gpumemshim::analyzer;

int run_check(const CheckOptions& o) {
  an::Suppressions sup;
  an::AnalyzeOptions opts;
  if (!o.suppressions.empty()) {
    try {
      sup = an::Suppressions::load(o.suppressions);
    } catch (const std::invalid_argument& e) {
      throw CliError(e.what());
    }
    opts.suppressions = &sup;
  }
  an::Report report = an::analyze(o.traces, opts);
  const an::Summary& s = report.summary;
  bool failed = s.leaked_bytes > o.max_leak_bytes;
  write_ci_outputs(o, report, an::FailPolicy{failed, std::nullopt});
  if (failed) {
    write_output("", an::leaks_text(report));
    fmt::print(stderr, "gpumemshim: check failed: {} bytes leaked (limit {})\n", s.leaked_bytes,
               o.max_leak_bytes);
    return kExitFindings;
  }
  write_output("", fmt::format("gpumemshim: check passed: {} bytes leaked (limit {}), {} suppressed, "
                               "{} failed allocations, peak {} bytes\n",
                               s.leaked_bytes, o.max_leak_bytes, s.suppressed_bytes,
                               s.failed_allocations, s.peak_bytes));
  return kExitClean;
}

}  // namespace gpumemshim::cli

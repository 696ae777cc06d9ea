#include <stdexcept>

#include "cli.h"
#include "gpumemshim/analyzer/analysis.h"
#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::cli {

namespace an = gpumemshim::analyzer;

int run_report(const ReportOptions& o) {
  if (o.format == "html") throw CliError("--format html is not implemented yet (use text or json)");
  if (o.format != "text" && o.format != "json")
    throw CliError("--format must be text or json, not '" + o.format + "'");
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
  std::string text = o.format == "json" ? an::report_json(report).dump(2) + "\n" : an::report_text(report);
  write_output(o.output, text);
  return kExitClean;
}

}  // namespace gpumemshim::cli

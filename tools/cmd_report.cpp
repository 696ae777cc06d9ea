#include <utility>
#include <vector>

#include "cli.h"
#include "suppressions_option.h"
#include "gpumemshim/analyzer/analyze.h"
#include "gpumemshim/analyzer/render.h"

namespace gpumemshim::cli {

namespace an = gpumemshim::analyzer;

int run_report(const ReportOptions& o) {
  if (o.format != "text" && o.format != "json" && o.format != "html")
    throw CliError("--format must be text, json or html, not '" + o.format + "'");
  an::Suppressions sup;
  an::AnalyzeOptions opts;
  opts.jobs = o.jobs;
  opts.progress = !o.quiet;
  use_suppressions(o.suppressions, sup, opts);
  // JSON and HTML carry each process's memory over time.
  opts.timelines = o.format != "text";
  an::Report report = an::analyze(o.traces, opts);
  nlohmann::json j;
  std::string text;
  if (o.format == "text") {
    text = an::report_text(report);
  } else if (o.format == "html") {
    text = an::report_html(report);
  } else {
    j = an::report_json(report);
    text = an::json_text(j);
  }
  write_output(o.output, text);
  // The process exits next: the report's hundreds of thousands of nodes (a big trace's stacks) are
  // left to the exit rather than freed one by one (a few % of a report). Kept reachable, so a leak
  // checker does not count them.
  static auto* const kept_until_exit = new std::vector<std::pair<an::Report, nlohmann::json>>();
  kept_until_exit->emplace_back(std::move(report), std::move(j));
  return kExitClean;
}

}  // namespace gpumemshim::cli

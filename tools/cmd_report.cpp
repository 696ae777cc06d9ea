#include <stdexcept>
#include <utility>
#include <vector>

#include "cli.h"
#include "gpumemshim/analyzer/analysis.h"
#include "gpumemshim/analyzer/report.h"
#include "render/report_html.h"
#include "findings/timeline.h"

namespace gpumemshim::cli {

namespace an = gpumemshim::analyzer;

int run_report(const ReportOptions& o) {
  if (o.format != "text" && o.format != "json" && o.format != "html")
    throw CliError("--format must be text, json or html, not '" + o.format + "'");
  an::Suppressions sup;
  an::AnalyzeOptions opts;
  opts.jobs = o.jobs;
  opts.progress = !o.quiet;
  if (!o.suppressions.empty()) {
    try {
      sup = an::Suppressions::load(o.suppressions);
    } catch (const std::invalid_argument& e) {
      throw CliError(e.what());
    }
    opts.suppressions = &sup;
  }
  // JSON and HTML carry each process's memory over time (processes[i].timeline), made from the
  // trace the analysis loaded rather than a second load.
  std::vector<nlohmann::json> timelines(o.traces.size());
  if (o.format != "text")
    opts.with_trace = [&timelines](size_t i, const an::LoadedTrace& trace, an::StackView& stacks) {
      timelines[i] = an::timeline_json(
          an::build_timeline(trace, an::kMaxTimelineSamples, an::kTimelineTopSites, &stacks));
    };
  an::Report report = an::analyze(o.traces, opts);
  std::string text;
  nlohmann::json j;
  if (o.format == "text") {
    text = an::report_text(report);
  } else {
    j = an::report_json(report);
    nlohmann::json& processes = j["processes"];
    for (size_t i = 0; i < timelines.size() && i < processes.size(); ++i)
      processes[i]["timeline"] = std::move(timelines[i]);
    text = o.format == "html" ? an::report_html(j) : j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
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

// `gpumemshim diff BASE NEW [--fail-on-regression PCT] [--format text|json]`.
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "cli.h"
#include "gpumemshim/analyzer/analyze.h"
#include "gpumemshim/analyzer/render.h"

namespace gpumemshim::cli {

namespace an = gpumemshim::analyzer;

namespace {

// The report of one run, with the timelines that hold each process's peak breakdown.
an::Report run_report(const std::string& trace) {
  an::AnalyzeOptions options;
  options.timelines = true;
  return an::analyze({trace}, options);
}

}  // namespace

int run_diff(const DiffOptions& o) {
  if (o.format != "text" && o.format != "json")
    throw CliError("--format must be text or json, not '" + o.format + "'");
  std::optional<double> pct;
  if (o.fail_on_regression) {
    if (!std::isfinite(*o.fail_on_regression) || *o.fail_on_regression < 0)
      throw CliError(fmt::format("--fail-on-regression must be a percentage >= 0, not {}", *o.fail_on_regression));
    pct = o.fail_on_regression;
  }
  an::Report base = run_report(o.base), next = run_report(o.next);
  // A comparison with a run that lost records would show what was lost as an improvement.
  if (!o.allow_incomplete) {
    std::string problem = integrity_error(base, "base");
    std::string other = integrity_error(next, "new");
    if (!other.empty()) problem += (problem.empty() ? "" : "; ") + other;
    if (!problem.empty()) throw CliError(problem + "; --allow-incomplete compares them anyway");
  }
  an::ReportDiff d = an::diff_reports(base, next);
  write_output(o.output, o.format == "json" ? an::json_text(an::diff_json(d, pct)) : an::diff_text(d, pct));
  if (pct && an::is_regression(d, *pct)) {
    auto p = an::change_pct(d.base_peak, d.new_peak), l = an::change_pct(d.base_leaked, d.new_leaked);
    auto show = [](std::optional<double> v) { return v ? fmt::format("{:+.1f}%", *v) : std::string("from 0"); };
    fmt::print(stderr, "gpumemshim: diff: regression over {}%: peak {}, leaked {}, {} new leak site(s)\n", *pct,
               show(p), show(l), d.new_leak_sites);
    return kExitFindings;
  }
  return kExitClean;
}

}  // namespace gpumemshim::cli

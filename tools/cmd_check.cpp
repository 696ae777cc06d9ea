#include <fmt/format.h>

#include "ci_outputs.h"
#include "cli.h"
#include "suppressions_option.h"
#include "gpumemshim/analyzer/analyze.h"
#include "gpumemshim/analyzer/render.h"

namespace gpumemshim::cli {

namespace an = gpumemshim::analyzer;

namespace {

// What fails `check`, decided once so that the exit code, the text and the CI outputs agree.
struct CheckVerdict {
  bool leaks_over_limit = false;
  std::vector<const an::Growth*> growth_over_limit;  // unsuppressed, above the limit
  bool failed() const { return leaks_over_limit || !growth_over_limit.empty(); }
};

CheckVerdict judge(const an::Report& report, const CheckOptions& o) {
  CheckVerdict v;
  v.leaks_over_limit = report.summary.leaked_bytes > o.max_leak_bytes;
  if (o.max_growth_bytes_per_step)
    for (const an::ProcessReport& p : report.processes)
      for (const an::Growth& g : p.growth)
        if (!g.suppressed && g.bytes_per_step > static_cast<double>(*o.max_growth_bytes_per_step))
          v.growth_over_limit.push_back(&g);
  return v;
}

std::string growth_failures_text(const CheckVerdict& v, uint64_t limit) {
  std::string out;
  for (const an::Growth* g : v.growth_over_limit) {
    std::string where = "an unknown site";
    for (const an::Frame& f : g->stack)
      if (!f.file.empty() && f.line) {
        where = fmt::format("{}:{}", f.file, f.line);
        break;
      }
    out +=
        fmt::format("GROWTH {} bytes per {} (limit {}) at {} pid {} id {}\n",
                    static_cast<uint64_t>(g->bytes_per_step), g->unit, limit, where, g->pid, g->id);
  }
  return out;
}

// What the report says besides the findings: traces accepted with --allow-incomplete, traces
// counted once, traces without events. On stdout, with the findings they qualify.
std::string notes_text(const an::Report& report) {
  std::string out;
  for (const std::string& problem : report.integrity.problems)
    out += fmt::format("gpumemshim: note: {} (accepted with --allow-incomplete: the findings cover only "
                       "what was recorded)\n", problem);
  for (const std::string& note : an::report_notes(report)) out += fmt::format("gpumemshim: note: {}\n", note);
  return out;
}

}  // namespace

int run_check(const CheckOptions& o) {
  an::Suppressions sup;
  an::AnalyzeOptions opts;
  use_suppressions(o.suppressions, sup, opts);
  an::Report report = an::analyze(o.traces, opts);
  const an::Summary& s = report.summary;
  const CheckVerdict verdict = judge(report, o);
  std::optional<double> growth_limit;
  if (o.max_growth_bytes_per_step) growth_limit = static_cast<double>(*o.max_growth_bytes_per_step);
  write_ci_outputs(o, report, an::FailPolicy{verdict.leaks_over_limit, growth_limit, o.allow_incomplete});
  // A trace that is not clean cannot pass a gate: what it lost may be the leak.
  if (!o.allow_incomplete)
    if (std::string problem = integrity_error(report); !problem.empty())
      throw CliError(problem + "; --allow-incomplete judges it by what was recorded");
  std::string text = notes_text(report);
  if (verdict.failed()) {
    if (verdict.leaks_over_limit) text += an::leaks_text(report);
    text += growth_failures_text(verdict, o.max_growth_bytes_per_step.value_or(0));
    write_output("", text);
    if (verdict.leaks_over_limit)
      fmt::print(stderr, "gpumemshim: check failed: {} bytes leaked (limit {})\n", s.leaked_bytes,
                 o.max_leak_bytes);
    if (!verdict.growth_over_limit.empty())
      fmt::print(
          stderr,
          "gpumemshim: check failed: {} site{} growing faster than {} bytes per step (or window)\n",
          verdict.growth_over_limit.size(), verdict.growth_over_limit.size() == 1 ? "" : "s",
          *o.max_growth_bytes_per_step);
    return kExitFindings;
  }
  std::string alive = s.alive_at_trace_end_allocations
                          ? fmt::format(", {} bytes alive when the trace ended (not leaks)", s.alive_at_trace_end_bytes)
                          : "";
  if (s.library_allocations)
    alive +=
        fmt::format(", {} bytes kept by libraries for themselves (not leaks)", s.library_bytes);
  text += fmt::format("gpumemshim: check passed: {} bytes leaked (limit {}), {} suppressed, "
                      "{} failed allocations, peak {} bytes{}\n",
                      s.leaked_bytes, o.max_leak_bytes, s.suppressed_bytes, s.failed_allocations, s.peak_bytes, alive);
  write_output("", text);
  return kExitClean;
}

}  // namespace gpumemshim::cli

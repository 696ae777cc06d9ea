// Everything from a trace (file names, functions, command lines, marker names) goes through
// html_escape: a trace is untrusted input and the report is opened in a browser.
#include <fmt/format.h>

#include <algorithm>

#include "gpumemshim/analyzer/render.h"
#include "gpumemshim/analyzer/units.h"
#include "render/accounting_render.h"
#include "render/frameworks_render.h"
#include "render/libraries_render.h"
#include "render/escape.h"
#include "render/html_chart.h"
#include "render/json_parts.h"
#include "render/sites.h"
#include "report/integrity.h"

namespace gpumemshim::analyzer {

namespace {

constexpr size_t kMaxTableRows = 200;
constexpr const char* kDash = "\u2014";  // a value the report does not have

constexpr const char* kStyle = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 12px} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 6px}
.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:120px}
.card b{display:block;font-size:18px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} td.num{text-align:right;font-variant-numeric:tabular-nums}
code,.frames{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.frames{white-space:pre}
.legend span.sw{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}
.muted{color:#777} .bad{color:#b00}
.banner{border:2px solid #b00;background:#fff4f4;border-radius:6px;padding:8px 14px;margin:0 0 12px}
.notes{border:1px solid #ccc;background:#f8f8f8;border-radius:6px;padding:6px 14px;margin:0 0 12px}
svg text{font-size:11px;fill:#444}
)";

std::string esc(std::string_view s) { return html_escape(s); }

double seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

// Cells as the page writes numbers: integers as they are, fractions with three significant
// digits, a dash where there is no value.
template <typename Int>
std::string num(Int v) {
  return fmt::format("{}", v);
}
std::string fraction(double v) { return fmt::format("{:.3g}", v); }

std::string bytes_cell(uint64_t b) {
  return fmt::format("<td class=\"num\" title=\"{} bytes\">{}</td>", b, esc(human_bytes(b)));
}
std::string bytes_cell(bool known, uint64_t b) {
  return known ? bytes_cell(b) : fmt::format("<td>{}</td>", kDash);
}

// The first frames of a stack, one per line.
std::string frames_cell(const std::vector<Frame>& stack, size_t max_frames = 4) {
  if (stack.empty()) return "<td class=\"muted\">(no stack)</td>";
  std::string lines;
  size_t n = 0;
  for (const Frame& f : stack) {
    if (n == max_frames) {
      lines += fmt::format("\n\u2026 {} more", stack.size() - n);
      break;
    }
    if (n++) lines += "\n";
    lines += frame_at(f, /*with_module=*/true);
  }
  return "<td class=\"frames\">" + esc(lines) + "</td>";
}

std::string peak_table(const Timeline& tl) {
  std::string out = fmt::format(
      "<h3>At the peak ({} at {:.3f} s)</h3>\n<table><tr><th>bytes</th><th>share</th><th>site</th><th>stack</th></tr>\n",
      esc(human_bytes(tl.peak_bytes)), seconds(tl.peak_time_ns));
  double total = std::max(1.0, static_cast<double>(tl.peak_bytes));
  for (size_t i = 0; i < tl.at_peak.size() && i < kReportedPeakSites; ++i) {
    const PeakSite& p = tl.at_peak[i];
    const TimelineSite& site = tl.all_sites[p.site];
    out += fmt::format("<tr>{}<td class=\"num\">{:.1f}%</td><td><code>{}</code></td>{}</tr>\n",
                       bytes_cell(p.bytes), 100.0 * static_cast<double>(p.bytes) / total, esc(site.label),
                       frames_cell(site.stack));
  }
  return out + "</table>\n";
}

std::string timeline_section(const Timeline& tl) {
  if (tl.samples.empty())
    return "<p class=\"muted empty\">No device memory was allocated in this trace: nothing to plot.</p>\n";
  ChartLegend legend;
  std::string out = "<div class=\"plot\">" + chart_svg(tl, legend) + "</div>\n<div class=\"legend\">";
  for (const auto& [color, label] : legend)
    out += fmt::format("<span class=\"sw\" style=\"background:{}\"></span>{}", color, esc(label));
  out += "</div>\n";
  if (!tl.at_peak.empty()) out += peak_table(tl);
  return out;
}

std::string category_row(const std::string& moment, const CategoryBytes& c) {
  std::string out = fmt::format("<tr><td>{}</td>", esc(moment));
  for (uint64_t b : c.bytes) out += bytes_cell(b);
  out += bytes_cell(c.total()) + bytes_cell(c.has_not_explained, c.not_explained) + "</tr>\n";
  return out;
}

// Memory by category: at the peak and at each OOM (a table), its highest point per window of steps
// or time (stacked bars), and the sites holding most of each tensor category at the peak.
std::string categories_section(const MemoryCategories& m) {
  std::string out = "<h3>Memory by category</h3>\n";
  if (!m.tagged)
    out +=
        "<p class=\"muted\">No tags or marked backward passes in this trace: tensor blocks are not "
        "told "
        "apart (all temporaries).</p>\n";
  out += "<table class=\"categories\"><tr><th>when</th>";
  for (size_t k = 0; k < kMemoryCategoryCount; ++k)
    out += fmt::format(
        "<th><span class=\"sw\" "
        "style=\"display:inline-block;width:10px;height:10px;background:{}\">"
        "</span> {}</th>",
        category_color(static_cast<MemoryCategory>(k)),
        esc(category_label(static_cast<MemoryCategory>(k))));
  out += "<th>total</th><th>not explained</th></tr>\n";
  out += category_row(fmt::format("peak, {:.3f} s", seconds(m.peak.time_ns)), m.peak);
  for (const CategoryOom& o : m.ooms)
    out += category_row(fmt::format("OOM on device {} asking {}, {:.3f} s", o.device,
                                    human_bytes(o.requested), seconds(o.at.time_ns)),
                        o.at);
  out += "</table>\n";
  ChartLegend legend;
  std::string chart = category_chart_svg(m, legend);
  if (!chart.empty()) {
    out += fmt::format("<p class=\"muted\">The highest point of each {}:</p>\n",
                       m.basis == "steps" ? "step (or group of steps)" : "time window");
    out += "<div class=\"plot\">" + chart + "</div>\n<div class=\"legend\">";
    for (const auto& [color, label] : legend)
      out += fmt::format("<span class=\"sw\" style=\"background:{}\"></span>{}", color, esc(label));
    out += "</div>\n";
  }
  if (!m.peak_sites.empty()) {
    out += "<table><tr><th>category</th><th>bytes at the peak</th><th>stack</th></tr>\n";
    for (const CategorySite& site : m.peak_sites)
      out += fmt::format("<tr><td>{}</td>{}{}</tr>\n", esc(category_label(site.category)),
                         bytes_cell(site.bytes), frames_cell(site.stack));
    out += "</table>\n";
  }
  return out;
}

// Whether the findings can be trusted, above everything else: a warning for traces that are not
// clean, notes for duplicates and traces without memory events.
std::string integrity_banner(const Report& report) {
  std::string out;
  const Verdict& v = report.integrity;
  if (!v.trusted) {
    out += fmt::format("<div class=\"banner\" id=\"integrity\"><b class=\"bad\">Warning: {} of {} cannot be "
                       "trusted in full ({}); the findings cover only what was recorded.</b><ul>\n",
                       v.not_clean, esc(plural(report.processes.size(), "trace")), esc(v.status));
    for (const ProcessReport& p : report.processes) {
      if (p.integrity.clean) continue;
      std::string write = p.integrity.write_error_text.empty()
                              ? ""
                              : " (the shim's write failed: " + p.integrity.write_error_text + ")";
      out += fmt::format("<li><code>{}</code>: {}{}</li>\n", esc(p.trace), esc(p.integrity.detail), esc(write));
    }
    out += "</ul></div>\n";
  }
  std::vector<std::string> notes = report_notes(report);
  if (!notes.empty()) {
    out += "<div class=\"notes\">";
    for (const std::string& n : notes) out += fmt::format("<p>Note: {}</p>", esc(n));
    out += "</div>\n";
  }
  return out;
}

std::string process_section(const ProcessReport& p) {
  std::string out = fmt::format("<h3>pid {} rank {} \u2014 <code>{}</code></h3>\n", p.info.pid, p.info.rank,
                                esc(p.info.command_line));
  const Summary& s = p.summary;
  out += fmt::format("<p class=\"muted\">trace <code>{}</code>, {} events, {:.3f} s{}{}</p>\n", esc(p.trace),
                     p.stats.events(), p.duration_s, p.truncated ? ", <span class=\"bad\">truncated</span>" : "",
                     p.clean_exit ? "" : ", <span class=\"bad\">no clean exit</span>");
  out += fmt::format("<p class=\"{}\">integrity: {}</p>\n", p.integrity.clean ? "muted" : "bad",
                     esc(p.integrity.clean ? p.integrity.name : p.integrity.detail));
  if (const std::string late = late_events_note(p.stats); !late.empty())
    out += fmt::format("<p class=\"bad\">note: {}</p>\n", esc(late));
  if (p.no_memory_events) out += "<p class=\"muted\">No CUDA memory events were recorded.</p>\n";
  out += "<table><tr><th>peak</th><th>leaked</th><th>allocations</th><th>frees</th><th>failed</th><th>steps</th></tr><tr>";
  out += bytes_cell(s.peak_bytes) + bytes_cell(s.leaked_bytes);
  out += fmt::format("<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr></table>\n",
                     s.allocations, s.frees, s.failed_allocations, s.steps);
  if (s.library_allocations)
    out += fmt::format(
        "<p class=\"muted\">library memory (handles, workspaces; not leaks): {} in {}</p>\n",
        esc(human_bytes(s.library_bytes)), esc(plural(s.library_allocations, "allocation")));
  out += accounting_html(p.accounting);
  out += libraries_html(p.libraries);
  out += frameworks_html(p.frameworks);
  if (p.timeline) out += timeline_section(*p.timeline);
  if (p.categories) out += categories_section(*p.categories);
  return out;
}

std::string leaks_section(const std::vector<const SiteGroup*>& leaks) {
  std::string out = "<h2>Leaks and survivors</h2>\n<table><tr><th>kind</th><th>bytes</th><th>count</th>"
                    "<th>api</th><th>pid</th><th>reason</th><th>stack</th></tr>\n";
  for (size_t i = 0; i < leaks.size() && i < kMaxTableRows; ++i) {
    const SiteGroup& l = *leaks[i];
    std::string kind = l.kind + (l.suppressed ? " (suppressed)" : "");
    out += fmt::format("<tr><td>{}</td>{}<td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td>{}</tr>\n",
                       esc(kind), bytes_cell(l.bytes), l.count, esc(api_label(l.torch_block, l.api)), l.pid,
                       esc(l.reason), frames_cell(l.stack));
  }
  if (leaks.size() > kMaxTableRows)
    out += fmt::format("<tr><td colspan=\"7\" class=\"muted\">{} more in the JSON report</td></tr>", leaks.size() - kMaxTableRows);
  return out + "</table>\n";
}

std::string growth_section(const std::vector<const Growth*>& growth) {
  std::string out =
      "<h2>Growth</h2>\n<table><tr><th>bytes</th><th>per</th><th>steps or windows</th>"
      "<th>confidence</th><th>first \u2192 last</th><th>projected OOM step or window</th>"
      "<th>pid</th><th>stack</th></tr>\n";
  for (const Growth* g : growth) {
    out += fmt::format(
        "<tr>{}<td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{} \u2192 {}</td><td class=\"num\">{}</td><td>{}</td>{}</tr>\n",
        bytes_cell(static_cast<uint64_t>(g->bytes_per_step)), esc(g->unit), g->steps,
        fraction(g->confidence), esc(human_bytes(g->first_live_bytes)),
        esc(human_bytes(g->last_live_bytes)),
        g->has_projection ? num(g->projected_oom_step) : kDash, g->pid, frames_cell(g->stack));
    const std::string cause = growth_cause(*g);
    if (!cause.empty())
      out += fmt::format("<tr><td colspan=\"8\" class=\"muted\">cause: {}</td></tr>\n", esc(cause));
  }
  return out + "</table>\n";
}

std::string oom_text(const std::vector<OomFinding>& ooms) {
  std::string out;
  for (const OomFinding& o : ooms)
    out += fmt::format("{}{} asked at {:.3f} s: {}", out.empty() ? "" : "; ",
                       human_bytes(o.requested), seconds(o.time_ns), o.verdict);
  return out.empty() ? kDash : out;
}

std::string fragmentation_section(const Report& report) {
  std::string out = "<h2>Fragmentation</h2>\n<table><tr><th>pid</th><th>device</th><th>reserved peak</th>"
                    "<th>allocated then</th><th>max reserved \u2212 allocated</th><th>inactive split blocks</th>"
                    "<th>largest free block</th><th>untracked</th><th>OOMs</th></tr>\n";
  for (const ProcessReport& p : report.processes)
    for (const DeviceFragmentation& d : p.fragmentation)
      out += fmt::format("<tr><td>{}</td><td>{}</td>{}{}{}<td class=\"num\">{}</td>{}{}<td>{}</td></tr>\n", d.pid,
                         d.device, bytes_cell(d.torch, d.reserved_peak), bytes_cell(d.torch, d.allocated_at_reserved_peak),
                         bytes_cell(d.torch, d.max_reserved_minus_allocated),
                         d.torch ? num(d.inactive_split_blocks) : kDash, bytes_cell(d.torch, d.largest_free_block),
                         bytes_cell(d.has_untracked, d.untracked), esc(oom_text(d.ooms)));
  return out + "</table>\n";
}

std::string advice_section(const Report& report) {
  std::string out = "<h2>Advice</h2>\n<table><tr><th>advice</th><th>what to change</th><th>finding</th><th>evidence</th></tr>\n";
  for (const ProcessReport& p : report.processes)
    for (const Advice& a : p.advice)
      out += fmt::format("<tr><td><b>{}</b><br><span class=\"muted\">{}</span></td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>\n",
                         esc(a.title), esc(a.id), esc(a.action), esc(a.finding), esc(a.evidence));
  return out + "</table>\n";
}

std::string failures_section(const Report& report) {
  std::string out = "<h2>Failed allocations</h2>\n<table><tr><th>time</th><th>api</th><th>size</th>"
                    "<th>error</th><th>live then</th><th>device free</th><th>pid</th><th>stack</th></tr>\n";
  size_t n = 0;
  for (const ProcessReport& p : report.processes)
    for (const Failure& f : p.failures) {
      if (n++ == kMaxTableRows) return out + "</table>\n";
      out += fmt::format("<tr><td class=\"num\">{:.3f} s</td><td>{}</td>{}<td>{}</td>{}{}<td>{}</td>{}</tr>\n",
                         seconds(f.event.time_ns), esc(format::api_name(f.event.api)), bytes_cell(f.event.size),
                         f.event.error, bytes_cell(f.event.live_device_bytes),
                         bytes_cell(f.event.has_meminfo, f.event.meminfo_free), f.pid, frames_cell(f.stack));
    }
  return out + "</table>\n";
}

std::string ranks_section(const Ranks& ranks) {
  std::string out = "<h2>Ranks</h2>\n";
  out += "<table><tr><th>rank</th><th>pid</th><th>host</th><th>peak</th><th>leaked</th><th>growth/step</th><th>findings</th></tr>\n";
  for (const RankEntry& r : ranks.per_rank)
    out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td>{}{}{}<td>{}</td></tr>\n", r.rank, r.pid, esc(r.host),
                       bytes_cell(r.peak_bytes), bytes_cell(r.leaked_bytes),
                       bytes_cell(static_cast<uint64_t>(std::max<int64_t>(0, r.growth_bytes_per_step))),
                       esc(rank_findings_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  out += "</table>\n";
  const RankEntry& heavy = ranks.per_rank.at(ranks.heaviest);
  const RankEntry& light = ranks.per_rank.at(ranks.lightest);
  std::string ratio = light.peak_bytes ? fraction(static_cast<double>(heavy.peak_bytes) /
                                                  static_cast<double>(light.peak_bytes))
                                       : kDash;
  out += fmt::format("<p>Heaviest rank {} vs lightest {}: peak differs by {} (ratio {}).</p>\n", heavy.rank,
                     light.rank, esc(human_bytes(heavy.peak_bytes - light.peak_bytes)), esc(ratio));
  return out;
}

}  // namespace

std::string report_html(const Report& report) {
  const Summary& summary = report.summary;
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                    "<title>gpumemshim report</title>\n<style>";
  out += kStyle;
  out += "</style></head><body>\n<h1>gpumemshim report</h1>\n";
  out += integrity_banner(report);
  out += "<div class=\"cards\">";
  out += fmt::format("<div class=\"card\">processes<b>{}</b></div>", report.processes.size());
  out += fmt::format("<div class=\"card\">peak device memory<b>{}</b></div>", esc(human_bytes(summary.peak_bytes)));
  out += fmt::format("<div class=\"card\">leaked<b class=\"{}\">{}</b></div>", summary.leaked_bytes ? "bad" : "",
                     esc(human_bytes(summary.leaked_bytes)));
  out += fmt::format("<div class=\"card\">failed allocations<b>{}</b></div>", summary.failed_allocations);
  out += fmt::format("<div class=\"card\">allocations<b>{}</b></div>", summary.allocations);
  out += "</div>\n<h2>Memory over time</h2>\n";
  auto any = [&](auto member) {
    return std::any_of(report.processes.begin(), report.processes.end(),
                       [&](const ProcessReport& p) { return !(p.*member).empty(); });
  };
  for (const ProcessReport& p : report.processes) out += process_section(p);
  if (any(&ProcessReport::advice)) out += advice_section(report);
  if (any(&ProcessReport::leaks)) out += leaks_section(all_leaks(report, /*include_suppressed=*/true));
  if (any(&ProcessReport::growth)) out += growth_section(all_growth(report));
  if (any(&ProcessReport::fragmentation)) out += fragmentation_section(report);
  if (any(&ProcessReport::failures)) out += failures_section(report);
  if (report.ranks.present()) out += ranks_section(report.ranks);
  out += fmt::format("<p class=\"muted\">schema {}</p>\n</body></html>\n", esc(kReportSchema));
  return out;
}

}  // namespace gpumemshim::analyzer

// Everything from a trace (file names, functions, command lines, marker names) goes through
// html_escape: a trace is untrusted input and the report is opened in a browser.
#include "render/report_html.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

using nlohmann::json;

namespace {

// Site colours, bottom layer first; the last one is "other sites".
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f"};
constexpr const char* kOtherColor = "#bab0ac";
constexpr size_t kMaxStepLines = 300;
constexpr size_t kMaxTableRows = 200;

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
svg text{font-size:11px;fill:#444}
)";

std::string esc(std::string_view s) { return html_escape(s); }

// Any JSON value as text: strings as they are, numbers as numbers, null as a dash.
std::string text_of(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "\u2014";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_float()) return fmt::format("{:.3g}", v.get<double>());
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string field(const json& o, const char* key) {
  return o.is_object() && o.contains(key) ? text_of(o[key]) : "\u2014";
}

uint64_t u64(const json& o, const char* key) {
  if (!o.is_object() || !o.contains(key) || !o[key].is_number()) return 0;
  const json& v = o[key];
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) return static_cast<uint64_t>(std::max<int64_t>(0, v.get<int64_t>()));
  return static_cast<uint64_t>(std::max(0.0, v.get<double>()));
}

double num(const json& o, const char* key) {
  return o.is_object() && o.contains(key) && o[key].is_number() ? o[key].get<double>() : 0.0;
}

std::string bytes_cell(const json& o, const char* key) {
  if (!o.is_object() || !o.contains(key) || !o[key].is_number()) return "<td>" + esc(field(o, key)) + "</td>";
  uint64_t b = u64(o, key);
  return fmt::format("<td class=\"num\" title=\"{} bytes\">{}</td>", b, esc(human_bytes(b)));
}

bool non_empty(const json& report, const char* key) {
  return report.contains(key) && !report[key].is_null() && !report[key].empty();
}

std::string frame_text(const json& f) {
  std::string fn = f.value("function", std::string());
  std::string file = f.value("file", std::string());
  uint64_t line = u64(f, "line");
  std::string out = fn.empty() ? f.value("pc", std::string("?")) : fn;
  if (!file.empty()) out += line ? fmt::format(" at {}:{}", file, line) : " at " + file;
  else if (f.contains("module") && f["module"].is_string() && !f["module"].get<std::string>().empty())
    out += " (" + f["module"].get<std::string>() + ")";
  return out;
}

// The first frames of a stack, one per line.
std::string frames_cell(const json& o, size_t max_frames = 4) {
  if (!o.is_object() || !o.contains("stack") || !o["stack"].is_array() || o["stack"].empty())
    return "<td class=\"muted\">(no stack)</td>";
  std::string lines;
  size_t n = 0;
  for (const json& f : o["stack"]) {
    if (n == max_frames) {
      lines += fmt::format("\n\u2026 {} more", o["stack"].size() - n);
      break;
    }
    if (n++) lines += "\n";
    lines += frame_text(f);
  }
  return "<td class=\"frames\">" + esc(lines) + "</td>";
}

// ---- the chart ----

struct Chart {
  double w = 1180, h = 420, left = 92, right = 16, top = 16, bottom = 44;
  double t_max = 0, v_max = 0;
  double x(double t) const { return left + (t / t_max) * (w - left - right); }
  double y(double v) const { return top + (h - top - bottom) * (1.0 - v / v_max); }
};

uint64_t site_value(const json& sample, const std::string& id) {
  if (!sample.contains("sites") || !sample["sites"].is_object()) return 0;
  auto it = sample["sites"].find(id);
  return it != sample["sites"].end() && it->is_number() ? it->get<uint64_t>() : 0;
}

std::string chart_svg(const json& tl, std::vector<std::pair<std::string, std::string>>& legend) {
  const json& samples = tl["samples"];
  Chart c;
  bool has_torch = false;
  for (const json& s : samples) {
    c.t_max = std::max(c.t_max, num(s, "t_s"));
    c.v_max = std::max<double>(c.v_max, static_cast<double>(u64(s, "live_bytes")));
    if (s.contains("reserved_bytes")) {
      has_torch = true;
      c.v_max = std::max<double>(c.v_max, static_cast<double>(u64(s, "reserved_bytes")));
      c.v_max = std::max<double>(c.v_max, static_cast<double>(u64(s, "allocated_bytes")));
    }
  }
  if (c.t_max <= 0) c.t_max = 1;
  c.v_max = c.v_max > 0 ? c.v_max * 1.05 : 1;

  std::vector<std::string> ids;
  if (tl.contains("sites") && tl["sites"].is_array())
    for (const json& s : tl["sites"]) {
      ids.push_back(s.value("id", std::string()));
      legend.emplace_back(kPalette[std::min(ids.size() - 1, std::size(kPalette) - 1)],
                          s.value("label", std::string("?")));
    }
  bool has_other = std::any_of(samples.begin(), samples.end(),
                               [](const json& s) { return site_value(s, "other") > 0; });
  if (has_other) {
    ids.push_back("other");
    legend.emplace_back(kOtherColor, "other sites");
  }

  std::string svg = fmt::format(
      "<svg class=\"chart\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\">\n", c.w, c.h);
  // Grid and axes.
  for (int i = 0; i <= 5; ++i) {
    double v = c.v_max / 1.05 * i / 5;
    double yy = c.y(v);
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e5e5e5\"/>"
                       "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                       c.left, yy, c.w - c.right, yy, c.left - 6, yy + 4,
                       esc(human_bytes(static_cast<uint64_t>(v))));
  }
  for (int i = 0; i <= 6; ++i) {
    double t = c.t_max * i / 6;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:.3g} s</text>\n", c.x(t),
                       c.h - c.bottom + 16, t);
  }
  // Stacked layers, drawn as steps (memory changes at events, not in between).
  std::vector<double> below(samples.size(), 0.0);
  for (size_t k = 0; k < ids.size(); ++k) {
    std::vector<double> above(samples.size());
    for (size_t i = 0; i < samples.size(); ++i)
      above[i] = below[i] + static_cast<double>(site_value(samples[i], ids[k]));
    std::string pts;
    for (size_t i = 0; i < samples.size(); ++i) {
      double x0 = c.x(num(samples[i], "t_s"));
      double x1 = i + 1 < samples.size() ? c.x(num(samples[i + 1], "t_s")) : x0;
      pts += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", x0, c.y(above[i]), x1, c.y(above[i]));
    }
    for (size_t i = samples.size(); i-- > 0;) {
      double x0 = c.x(num(samples[i], "t_s"));
      double x1 = i + 1 < samples.size() ? c.x(num(samples[i + 1], "t_s")) : x0;
      pts += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", x1, c.y(below[i]), x0, c.y(below[i]));
    }
    svg += fmt::format("<polygon class=\"layer\" fill=\"{}\" points=\"{}\"><title>{}</title></polygon>\n",
                       legend[k].first, pts, esc(legend[k].second));
    below = std::move(above);
  }
  auto line = [&](const char* key, const char* color, const char* name) {
    std::string pts;
    for (size_t i = 0; i < samples.size(); ++i) {
      double x0 = c.x(num(samples[i], "t_s"));
      double x1 = i + 1 < samples.size() ? c.x(num(samples[i + 1], "t_s")) : x0;
      double yy = c.y(static_cast<double>(u64(samples[i], key)));
      pts += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", x0, yy, x1, yy);
    }
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"><title>{}</title></polyline>\n",
                       color, pts, name);
  };
  if (has_torch) {
    line("reserved_bytes", "#7a0019", "reserved (segments)");
    line("allocated_bytes", "#006d2c", "allocated (tensor blocks)");
    legend.emplace_back("#7a0019", "reserved (PyTorch segments)");
    legend.emplace_back("#006d2c", "allocated (PyTorch tensor blocks)");
  }
  // Step marks, thinned evenly when there are many.
  if (tl.contains("steps") && tl["steps"].is_array() && !tl["steps"].empty()) {
    const json& steps = tl["steps"];
    size_t stride = (steps.size() + kMaxStepLines - 1) / kMaxStepLines;
    for (size_t i = 0; i < steps.size(); i += stride) {
      double xx = c.x(steps[i].is_number() ? steps[i].get<double>() : 0.0);
      svg += fmt::format("<line class=\"step\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" "
                         "stroke=\"#333\" stroke-opacity=\"0.45\" stroke-dasharray=\"3,3\"/>\n",
                         xx, c.top, c.h - c.bottom);
    }
    legend.emplace_back("#777", fmt::format("step marks ({}{})", steps.size(), stride > 1 ? ", thinned" : ""));
  }
  svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#888\"/>"
                     "<line x1=\"{0:.1f}\" y1=\"{2:.1f}\" x2=\"{3:.1f}\" y2=\"{2:.1f}\" stroke=\"#888\"/>\n",
                     c.left, c.top, c.h - c.bottom, c.w - c.right);
  svg += "</svg>\n";
  return svg;
}

std::string process_section(const json& p) {
  std::string out = fmt::format("<h3>pid {} rank {} \u2014 <code>{}</code></h3>\n", esc(field(p, "pid")),
                                esc(field(p, "rank")), esc(field(p, "command_line")));
  const json s = p.value("summary", json::object());
  out += fmt::format("<p class=\"muted\">trace <code>{}</code>, {} events, {:.3f} s{}{}</p>\n",
                     esc(field(p, "trace")), esc(field(p, "events")), num(p, "duration_s"),
                     p.value("truncated", false) ? ", <span class=\"bad\">truncated</span>" : "",
                     p.value("clean_exit", true) ? "" : ", <span class=\"bad\">no clean exit</span>");
  out += "<table><tr><th>peak</th><th>leaked</th><th>allocations</th><th>frees</th><th>failed</th><th>steps</th></tr><tr>";
  out += bytes_cell(s, "peak_bytes") + bytes_cell(s, "leaked_bytes");
  out += fmt::format("<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr></table>\n",
                     esc(field(s, "allocations")), esc(field(s, "frees")),
                     esc(field(s, "failed_allocations")), esc(field(s, "steps")));
  if (!p.contains("timeline") || !p["timeline"].is_object()) return out;
  const json& tl = p["timeline"];
  if (!tl.contains("samples") || !tl["samples"].is_array() || tl["samples"].empty()) {
    out += "<p class=\"muted empty\">No device memory was allocated in this trace: nothing to plot.</p>\n";
    return out;
  }
  std::vector<std::pair<std::string, std::string>> legend;
  out += "<div class=\"plot\">" + chart_svg(tl, legend) + "</div>\n<div class=\"legend\">";
  for (const auto& [color, label] : legend)
    out += fmt::format("<span class=\"sw\" style=\"background:{}\"></span>{}", color, esc(label));
  out += "</div>\n";
  if (tl.contains("peak") && tl["peak"].is_object() && tl["peak"].contains("sites") && !tl["peak"]["sites"].empty()) {
    const json& peak = tl["peak"];
    out += fmt::format("<h3>At the peak ({} at {:.3f} s)</h3>\n<table><tr><th>bytes</th><th>share</th><th>site</th><th>stack</th></tr>\n",
                       esc(human_bytes(u64(peak, "live_bytes"))), num(peak, "t_s"));
    double total = std::max(1.0, static_cast<double>(u64(peak, "live_bytes")));
    for (const json& site : peak["sites"])
      out += fmt::format("<tr>{}<td class=\"num\">{:.1f}%</td><td><code>{}</code></td>{}</tr>\n",
                         bytes_cell(site, "bytes"), 100.0 * static_cast<double>(u64(site, "bytes")) / total,
                         esc(field(site, "label")), frames_cell(site));
    out += "</table>\n";
  }
  return out;
}

std::string leaks_section(const json& leaks) {
  std::string out = "<h2>Leaks and survivors</h2>\n<table><tr><th>kind</th><th>bytes</th><th>count</th>"
                    "<th>api</th><th>pid</th><th>reason</th><th>stack</th></tr>\n";
  size_t n = 0;
  for (const json& l : leaks) {
    if (n++ == kMaxTableRows) break;
    std::string kind = field(l, "kind");
    if (l.value("suppressed", false)) kind += " (suppressed)";
    out += fmt::format("<tr><td>{}</td>{}<td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td>{}</tr>\n",
                       esc(kind), bytes_cell(l, "bytes"), esc(field(l, "count")), esc(field(l, "api")),
                       esc(field(l, "pid")), esc(l.contains("reason") ? field(l, "reason") : ""), frames_cell(l));
  }
  if (leaks.size() > kMaxTableRows)
    out += fmt::format("<tr><td colspan=\"7\" class=\"muted\">{} more in the JSON report</td></tr>", leaks.size() - kMaxTableRows);
  return out + "</table>\n";
}

std::string growth_section(const json& growth) {
  std::string out = "<h2>Growth</h2>\n<table><tr><th>bytes/step</th><th>steps</th><th>confidence</th>"
                    "<th>first \u2192 last</th><th>projected OOM step</th><th>pid</th><th>stack</th></tr>\n";
  for (const json& g : growth)
    out += fmt::format("<tr>{}<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{} \u2192 {}</td>"
                       "<td class=\"num\">{}</td><td>{}</td>{}</tr>\n",
                       bytes_cell(g, "bytes_per_step"), esc(field(g, "steps")), esc(field(g, "confidence")),
                       esc(human_bytes(u64(g, "first_live_bytes"))), esc(human_bytes(u64(g, "last_live_bytes"))),
                       esc(field(g, "projected_oom_step")), esc(field(g, "pid")), frames_cell(g));
  return out + "</table>\n";
}

std::string fragmentation_section(const json& per_device) {
  std::string out = "<h2>Fragmentation</h2>\n<table><tr><th>pid</th><th>device</th><th>reserved peak</th>"
                    "<th>allocated then</th><th>max reserved \u2212 allocated</th><th>inactive split blocks</th>"
                    "<th>largest free block</th><th>untracked</th><th>OOMs</th></tr>\n";
  for (const json& d : per_device) {
    std::string ooms;
    if (d.contains("ooms") && d["ooms"].is_array())
      for (const json& o : d["ooms"])
        ooms += fmt::format("{}{} asked at {:.3f} s, {} free in total{}", ooms.empty() ? "" : "; ",
                            human_bytes(u64(o, "requested_bytes")), num(o, "time_s"),
                            human_bytes(u64(o, "device_free_bytes")),
                            o.value("enough_total_free", false) ? " (enough: fragmentation)" : "");
    out += fmt::format("<tr><td>{}</td><td>{}</td>{}{}{}<td class=\"num\">{}</td>{}{}<td>{}</td></tr>\n",
                       esc(field(d, "pid")), esc(field(d, "device")), bytes_cell(d, "reserved_peak_bytes"),
                       bytes_cell(d, "allocated_at_reserved_peak_bytes"),
                       bytes_cell(d, "max_reserved_minus_allocated_bytes"), esc(field(d, "inactive_split_blocks")),
                       bytes_cell(d, "largest_free_block_bytes"), bytes_cell(d, "untracked_bytes"),
                       esc(ooms.empty() ? "\u2014" : ooms));
  }
  return out + "</table>\n";
}

std::string advice_section(const json& advice) {
  std::string out = "<h2>Advice</h2>\n<table><tr><th>advice</th><th>what to change</th><th>finding</th><th>evidence</th></tr>\n";
  for (const json& a : advice)
    out += fmt::format("<tr><td><b>{}</b><br><span class=\"muted\">{}</span></td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>\n",
                       esc(field(a, "title")), esc(field(a, "id")), esc(field(a, "action")),
                       esc(field(a, "finding")), esc(field(a, "evidence")));
  return out + "</table>\n";
}

std::string failures_section(const json& failures) {
  std::string out = "<h2>Failed allocations</h2>\n<table><tr><th>time</th><th>api</th><th>size</th>"
                    "<th>error</th><th>live then</th><th>device free</th><th>pid</th><th>stack</th></tr>\n";
  size_t n = 0;
  for (const json& f : failures) {
    if (n++ == kMaxTableRows) break;
    out += fmt::format("<tr><td class=\"num\">{:.3f} s</td><td>{}</td>{}<td>{}</td>{}{}<td>{}</td>{}</tr>\n",
                       num(f, "time_s"), esc(field(f, "api")), bytes_cell(f, "size"), esc(field(f, "error")),
                       bytes_cell(f, "live_device_bytes"), bytes_cell(f, "device_free_bytes"),
                       esc(field(f, "pid")), frames_cell(f));
  }
  return out + "</table>\n";
}

std::string ranks_section(const json& ranks) {
  std::string out = "<h2>Ranks</h2>\n";
  if (ranks.contains("per_rank") && ranks["per_rank"].is_array()) {
    out += "<table><tr><th>rank</th><th>pid</th><th>host</th><th>peak</th><th>leaked</th><th>growth/step</th><th>findings</th></tr>\n";
    for (const json& r : ranks["per_rank"])
      out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td>{}{}{}<td>{}</td></tr>\n", esc(field(r, "rank")),
                         esc(field(r, "pid")), esc(field(r, "host")), bytes_cell(r, "peak_bytes"),
                         bytes_cell(r, "leaked_bytes"), bytes_cell(r, "growth_bytes_per_step"),
                         esc(field(r, "findings")));
    out += "</table>\n";
  }
  if (ranks.contains("imbalance") && ranks["imbalance"].is_object()) {
    const json& im = ranks["imbalance"];
    out += fmt::format("<p>Heaviest rank {} vs lightest {}: peak differs by {} (ratio {}).</p>\n",
                       esc(field(im, "heaviest_rank")), esc(field(im, "lightest_rank")),
                       esc(human_bytes(u64(im, "peak_bytes_diff"))), esc(field(im, "peak_ratio")));
  }
  return out;
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string report_html(const json& report) {
  const json summary = report.value("summary", json::object());
  const json processes = report.value("processes", json::array());
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                    "<title>gpumemshim report</title>\n<style>";
  out += kStyle;
  out += "</style></head><body>\n<h1>gpumemshim report</h1>\n<div class=\"cards\">";
  out += fmt::format("<div class=\"card\">processes<b>{}</b></div>", processes.size());
  out += fmt::format("<div class=\"card\">peak device memory<b>{}</b></div>", esc(human_bytes(u64(summary, "peak_bytes"))));
  out += fmt::format("<div class=\"card\">leaked<b class=\"{}\">{}</b></div>", u64(summary, "leaked_bytes") ? "bad" : "",
                     esc(human_bytes(u64(summary, "leaked_bytes"))));
  out += fmt::format("<div class=\"card\">failed allocations<b>{}</b></div>", esc(field(summary, "failed_allocations")));
  out += fmt::format("<div class=\"card\">allocations<b>{}</b></div>", esc(field(summary, "allocations")));
  out += "</div>\n<h2>Memory over time</h2>\n";
  for (const json& p : processes) out += process_section(p);
  if (non_empty(report, "recommendations")) out += advice_section(report["recommendations"]);
  if (non_empty(report, "leaks")) out += leaks_section(report["leaks"]);
  if (non_empty(report, "growth")) out += growth_section(report["growth"]);
  if (report.contains("fragmentation") && report["fragmentation"].is_object() &&
      non_empty(report["fragmentation"], "per_device"))
    out += fragmentation_section(report["fragmentation"]["per_device"]);
  if (non_empty(report, "failures")) out += failures_section(report["failures"]);
  if (non_empty(report, "ranks") && report["ranks"].is_object()) out += ranks_section(report["ranks"]);
  out += fmt::format("<p class=\"muted\">schema {}</p>\n</body></html>\n", esc(field(report, "schema")));
  return out;
}

}  // namespace gpumemshim::analyzer

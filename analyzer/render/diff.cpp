#include <algorithm>
#include <cstdlib>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "gpumemshim/analyzer/render.h"
#include "gpumemshim/analyzer/units.h"
#include "render/json_parts.h"
#include "render/sites.h"

namespace gpumemshim::analyzer {

using nlohmann::json;

namespace {

// Bytes per site id, with the stack of its first entry.
struct SiteTotal {
  uint64_t bytes = 0;
  std::vector<Frame> stack;
};
using SiteMap = std::map<std::string, SiteTotal>;

void add_site(SiteMap& sites, const std::string& id, uint64_t bytes, const std::vector<Frame>& stack) {
  SiteTotal& s = sites[id];
  s.bytes += bytes;
  if (s.stack.empty()) s.stack = stack;
}

// Leak sites that count in leaked_bytes: kind "leak", not suppressed.
SiteMap leak_sites(const Report& report) {
  SiteMap out;
  for (const SiteGroup* g : all_leaks(report, /*include_suppressed=*/false)) add_site(out, g->id, g->bytes, g->stack);
  return out;
}

// Bytes per site at each process's peak (the sites the reports list), summed over processes;
// nullopt without timelines.
std::optional<SiteMap> peak_sites(const Report& report) {
  SiteMap out;
  if (report.processes.empty()) return std::nullopt;
  for (const ProcessReport& p : report.processes) {
    if (!p.timeline) return std::nullopt;
    const Timeline& tl = *p.timeline;
    for (size_t i = 0; i < tl.at_peak.size() && i < kReportedPeakSites; ++i) {
      const TimelineSite& s = tl.all_sites[tl.at_peak[i].site];
      add_site(out, s.id, tl.at_peak[i].bytes, s.stack);
    }
  }
  return out;
}

void compare(const SiteMap& base, const SiteMap& next, const char* what, ReportDiff& d) {
  auto change = [&](const std::string& id, uint64_t b, uint64_t n, const std::vector<Frame>& stack) {
    if (b == n) return;
    SiteChange c{id, what, b, n, site_label(stack), stack};
    (n > b ? d.worse : d.better).push_back(std::move(c));
  };
  for (const auto& [id, n] : next) {
    auto it = base.find(id);
    uint64_t b = it == base.end() ? 0 : it->second.bytes;
    if (it == base.end() && std::string(what) == "leak") ++d.new_leak_sites;
    change(id, b, n.bytes, n.stack);
  }
  for (const auto& [id, b] : base)
    if (!next.count(id)) change(id, b.bytes, 0, b.stack);
}

std::vector<std::string> traces_of(const Report& report) {
  std::vector<std::string> out;
  for (const ProcessReport& p : report.processes) out.push_back(p.trace);
  return out;
}

std::string signed_bytes(int64_t delta) {
  return fmt::format("{}{}", delta < 0 ? "-" : "+", human_bytes(static_cast<uint64_t>(std::llabs(delta))));
}

std::string pct_text(uint64_t base, uint64_t next) {
  std::optional<double> p = change_pct(base, next);
  return p ? fmt::format("{:+.1f}%", *p) : std::string("new");
}

json site_json(const SiteChange& c) {
  return {{"id", c.id}, {"what", c.what}, {"base_bytes", c.base_bytes}, {"new_bytes", c.new_bytes},
          {"delta_bytes", c.delta()}, {"label", c.label}, {"stack", frames_to_json(c.stack)}};
}

json pct_json(uint64_t base, uint64_t next) {
  std::optional<double> p = change_pct(base, next);
  return p ? json(*p) : json(nullptr);
}

json verdict_json(const Verdict& v) {
  return {{"status", v.status}, {"trusted", v.trusted}, {"problems", v.problems}};
}

// One line per trace of either side that is not clean: the comparison is only as good as them.
std::string integrity_text(const ReportDiff& d) {
  std::string out;
  auto side = [&](const char* name, const Verdict& v) {
    for (const std::string& p : v.problems) out += fmt::format("  WARNING: {} trace {}\n", name, p);
  };
  side("base", d.base_integrity);
  side("new", d.new_integrity);
  return out;
}

}  // namespace

std::optional<double> change_pct(uint64_t base, uint64_t next) {
  if (base == 0) return next == 0 ? std::optional<double>(0.0) : std::nullopt;
  return (static_cast<double>(next) - static_cast<double>(base)) * 100.0 / static_cast<double>(base);
}

bool is_regression(const ReportDiff& d, double pct) {
  auto grew = [&](uint64_t b, uint64_t n) {
    std::optional<double> p = change_pct(b, n);
    return !p || *p > pct;
  };
  return grew(d.base_peak, d.new_peak) || grew(d.base_leaked, d.new_leaked) || d.new_leak_sites > 0;
}

ReportDiff diff_reports(const Report& base, const Report& next) {
  ReportDiff d;
  d.base_traces = traces_of(base);
  d.new_traces = traces_of(next);
  d.base_integrity = base.integrity;
  d.new_integrity = next.integrity;
  d.base_peak = base.summary.peak_bytes;
  d.new_peak = next.summary.peak_bytes;
  d.base_leaked = base.summary.leaked_bytes;
  d.new_leaked = next.summary.leaked_bytes;
  compare(leak_sites(base), leak_sites(next), "leak", d);
  std::optional<SiteMap> base_peak = peak_sites(base), next_peak = peak_sites(next);
  d.peak_sites_known = base_peak && next_peak;
  if (d.peak_sites_known) compare(*base_peak, *next_peak, "peak", d);
  auto by_delta = [](const SiteChange& a, const SiteChange& b) {
    if (std::llabs(a.delta()) != std::llabs(b.delta())) return std::llabs(a.delta()) > std::llabs(b.delta());
    return std::tie(a.what, a.id) < std::tie(b.what, b.id);
  };
  std::sort(d.worse.begin(), d.worse.end(), by_delta);
  std::sort(d.better.begin(), d.better.end(), by_delta);
  return d;
}

json diff_json(const ReportDiff& d, std::optional<double> fail_pct) {
  json worse = json::array(), better = json::array();
  for (const SiteChange& c : d.worse) worse.push_back(site_json(c));
  for (const SiteChange& c : d.better) better.push_back(site_json(c));
  return {{"schema", kDiffSchema},
          {"base", {{"traces", d.base_traces}, {"peak_bytes", d.base_peak}, {"leaked_bytes", d.base_leaked},
                    {"integrity", verdict_json(d.base_integrity)}}},
          {"new", {{"traces", d.new_traces}, {"peak_bytes", d.new_peak}, {"leaked_bytes", d.new_leaked},
                   {"integrity", verdict_json(d.new_integrity)}}},
          {"peak_change_pct", pct_json(d.base_peak, d.new_peak)},
          {"leaked_change_pct", pct_json(d.base_leaked, d.new_leaked)},
          {"new_leak_sites", d.new_leak_sites},
          {"peak_sites_known", d.peak_sites_known},
          {"worse", worse},
          {"better", better},
          {"fail_on_regression_pct", fail_pct ? json(*fail_pct) : json(nullptr)},
          {"regression", fail_pct ? json(is_regression(d, *fail_pct)) : json(nullptr)}};
}

std::string diff_text(const ReportDiff& d, std::optional<double> fail_pct) {
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : " ") + x;
    return s;
  };
  std::string out = fmt::format("gpumemshim diff: {} -> {}\n", join(d.base_traces), join(d.new_traces));
  out += integrity_text(d);
  auto line = [&](const char* name, uint64_t b, uint64_t n) {
    out += fmt::format("  {:<7} {} -> {} ({}, {})\n", name, human_bytes(b), human_bytes(n),
                       signed_bytes(static_cast<int64_t>(n) - static_cast<int64_t>(b)), pct_text(b, n));
  };
  line("peak:", d.base_peak, d.new_peak);
  line("leaked:", d.base_leaked, d.new_leaked);
  if (!d.peak_sites_known) out += "  (no per-site peak breakdown: the reports have no timelines)\n";
  auto sites = [&](const char* title, const std::vector<SiteChange>& v) {
    if (v.empty()) return;
    out += fmt::format("{}:\n", title);
    for (const SiteChange& c : v) {
      const char* tag = c.what == "leak" ? (c.base_bytes == 0 ? "new leak" : c.new_bytes == 0 ? "leak gone" : "leak")
                                         : "at peak";
      out += fmt::format("  {:<9} {:>12}  {} -> {}  {}  [{}]\n", tag, signed_bytes(c.delta()),
                         human_bytes(c.base_bytes), human_bytes(c.new_bytes), c.label, c.id);
    }
  };
  sites("worse", d.worse);
  sites("better", d.better);
  if (d.worse.empty() && d.better.empty()) out += "no call site changed\n";
  if (fail_pct)
    out += fmt::format("regression (over {}%): {}\n", *fail_pct, is_regression(d, *fail_pct) ? "yes" : "no");
  return out;
}

}  // namespace gpumemshim::analyzer

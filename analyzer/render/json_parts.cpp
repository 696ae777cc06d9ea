#include "render/json_parts.h"

#include "gpumemshim/analyzer/render.h"
#include "gpumemshim/analyzer/units.h"

namespace gpumemshim::analyzer {

using nlohmann::json;

namespace {

double seconds(uint64_t ns) {
  return static_cast<double>(ns) / 1e9;
}

json timeline_sites_json(const std::vector<TimelineSite>& sites) {
  json out = json::array();
  for (const TimelineSite& s : sites)
    out.push_back({{"id", s.id},
                   {"label", s.label},
                   {"peak_bytes", s.peak_bytes},
                   {"stack", frames_to_json(s.stack)}});
  return out;
}

// Each sample lists only the top sites that hold bytes, by id, and the rest as "other".
json timeline_samples_json(const Timeline& tl) {
  json samples = json::array();
  for (const TimelineSample& s : tl.samples) {
    json by_site = json::object();
    for (size_t i = 0; i < tl.sites.size(); ++i)
      if (s.sites[i]) by_site[tl.sites[i].id] = s.sites[i];
    if (s.sites.back()) by_site["other"] = s.sites.back();
    json o = {{"t_s", seconds(s.time_ns)}, {"live_bytes", s.live_bytes}};
    if (tl.has_torch) {
      o["reserved_bytes"] = s.reserved_bytes;
      o["allocated_bytes"] = s.allocated_bytes;
    }
    o["sites"] = std::move(by_site);
    samples.push_back(std::move(o));
  }
  return samples;
}

json timeline_peak_json(const Timeline& tl) {
  json at_peak = json::array();
  for (const PeakSite& p : tl.at_peak) {
    if (at_peak.size() == kReportedPeakSites) break;
    const TimelineSite& s = tl.all_sites[p.site];
    at_peak.push_back(
        {{"id", s.id}, {"label", s.label}, {"bytes", p.bytes}, {"stack", frames_to_json(s.stack)}});
  }
  return {{"t_s", seconds(tl.peak_time_ns)},
          {"live_bytes", tl.peak_bytes},
          {"sites", std::move(at_peak)}};
}

}  // namespace

// Reports list tens of thousands of frames: each object is filled in place, its keys in the map's
// (sorted) order so that every insertion lands at the end, rather than from an initializer list
// (which builds a [key, value] array per member first).
json frames_to_json(const std::vector<Frame>& frames) {
  json a = json::array();
  json::array_t& items = *a.get_ptr<json::array_t*>();
  items.reserve(frames.size());
  for (const Frame& f : frames) {
    json& o = items.emplace_back(json::value_t::object);
    json::object_t& m = *o.get_ptr<json::object_t*>();
    m.emplace_hint(m.end(), "file", f.file);
    m.emplace_hint(m.end(), "function", f.function);
    m.emplace_hint(m.end(), "inlined", f.inlined);
    m.emplace_hint(m.end(), "line", f.line);
    m.emplace_hint(m.end(), "module", f.module);
    m.emplace_hint(m.end(), "pc", pc_hex(f.pc));
    m.emplace_hint(m.end(), "python", f.python);
  }
  return a;
}

namespace {

json category_bytes_json(const CategoryBytes& c) {
  json bytes = json::object();
  for (size_t k = 0; k < kMemoryCategoryCount; ++k)
    bytes[std::string(memory_category_name(static_cast<MemoryCategory>(k)))] = c.bytes[k];
  return {{"t_s", seconds(c.time_ns)},
          {"total_bytes", c.total()},
          {"bytes", std::move(bytes)},
          {"not_explained_bytes", c.has_not_explained ? json(c.not_explained) : json()}};
}

}  // namespace

static json category_sites_json(const std::vector<CategorySite>& all) {
  json sites = json::array();
  for (const CategorySite& s : all)
    sites.push_back({{"category", std::string(memory_category_name(s.category))},
                     {"id", s.id},
                     {"bytes", s.bytes},
                     {"stack", frames_to_json(s.stack)}});
  return sites;
}

json categories_json(const MemoryCategories& m) {
  json ooms = json::array();
  for (const CategoryOom& o : m.ooms) {
    json e = category_bytes_json(o.at);
    e["device"] = o.device;
    e["requested_bytes"] = o.requested;
    e["source"] = o.torch ? "torch" : "runtime";
    e["in_pass_bytes"] = o.in_pass;
    ooms.push_back(std::move(e));
  }
  const bool steps = m.basis == "steps";
  json windows = json::array();
  for (const CategoryWindow& w : m.windows) {
    json e = category_bytes_json(w.at_peak);
    if (steps) {
      e["first_step"] = w.first;
      e["last_step"] = w.last;
    } else {
      e["start_s"] = seconds(w.first);
      e["end_s"] = seconds(w.last);
    }
    windows.push_back(std::move(e));
  }
  return {{"tagged", m.tagged},
          {"tags", m.tags},
          {"unmatched_tags", m.unmatched_tags},
          {"peak", category_bytes_json(m.peak)},
          {"peak_sites", category_sites_json(m.peak_sites)},
          {"kept_sites", category_sites_json(m.kept_sites)},
          {"ooms", std::move(ooms)},
          {"basis", m.basis},
          {"windows", std::move(windows)}};
}

json timeline_json(const Timeline& tl) {
  json steps = json::array();
  for (uint64_t t : tl.steps_ns) steps.push_back(seconds(t));
  return {{"samples", timeline_samples_json(tl)},
          {"sites", timeline_sites_json(tl.sites)},
          {"steps", std::move(steps)},
          {"peak", timeline_peak_json(tl)}};
}

json rank_findings_json(const RankEntry& e) {
  json findings = json::array();
  for (const RankFinding& f : e.findings)
    findings.push_back({{"kind", f.kind}, {"id", f.id}, {"bytes", f.bytes}});
  return findings;
}

json ranks_json(const Ranks& r) {
  json per_rank = json::array();
  for (const RankEntry& e : r.per_rank)
    per_rank.push_back({{"rank", e.rank},
                        {"pid", e.pid},
                        {"host", e.host},
                        {"peak_bytes", e.peak_bytes},
                        {"leaked_bytes", e.leaked_bytes},
                        {"growth_bytes_per_step", e.growth_bytes_per_step},
                        {"findings", rank_findings_json(e)}});
  const RankEntry& heavy = r.per_rank.at(r.heaviest);
  const RankEntry& light = r.per_rank.at(r.lightest);
  json sites = json::array();
  for (const SiteDiff& s : r.sites)
    sites.push_back({{"id", s.id},
                     {"bytes_diff", s.bytes_diff},
                     {"heaviest_bytes", s.heaviest_bytes},
                     {"lightest_bytes", s.lightest_bytes},
                     {"stack", frames_to_json(s.stack)}});
  json ratio =
      light.peak_bytes
          ? json(static_cast<double>(heavy.peak_bytes) / static_cast<double>(light.peak_bytes))
          : json(nullptr);
  return {{"per_rank", std::move(per_rank)},
          {"imbalance",
           {{"heaviest_rank", heavy.rank},
            {"heaviest_pid", heavy.pid},
            {"lightest_rank", light.rank},
            {"lightest_pid", light.pid},
            {"peak_bytes_diff", heavy.peak_bytes - light.peak_bytes},
            {"peak_ratio", ratio},
            {"sites", std::move(sites)}}}};
}

std::string json_text(const json& value, int indent) {
  return value.dump(indent, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace gpumemshim::analyzer

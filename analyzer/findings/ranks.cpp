#include "findings/ranks.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "findings/leaks.h"
#include "report/analysis.h"
#include "findings/peak_sites.h"
#include "gpumemshim/analyzer/report.h"
#include "report/stack_view.h"

namespace gpumemshim::analyzer {

std::vector<SiteBytes> sites_at_peak(const LoadedTrace& trace, StackView& stacks) {
  // Raw sites first, then merged by symbolized stack and api like the leak groups, so a site has
  // the same id here as in "leaks". Only device memory counts towards the peak.
  const std::vector<RawSite>& raw = trace.replay.sites();
  std::vector<uint64_t> bytes = trace.replay.peaks().sites().at_peak(trace.replay.site_live());
  std::map<std::string, SiteBytes> merged;
  for (size_t i = 0; i < raw.size() && i < bytes.size(); ++i) {
    const RawSite& r = raw[i];
    if (bytes[i] == 0 || r.torch_block || !is_device_memory_kind(r.kind)) continue;
    const std::vector<Frame>& frames = stacks.frames(r.stack_id);
    std::string id = site_id(stacks.stable_key(r.stack_id), r.api);
    auto [it, inserted] = merged.try_emplace(id);
    if (inserted) {
      it->second.id = id;
      it->second.api = r.api;
      it->second.stack = frames;
    }
    it->second.bytes += bytes[i];
  }
  std::vector<SiteBytes> out;
  out.reserve(merged.size());
  for (auto& [id, s] : merged) out.push_back(std::move(s));
  std::stable_sort(out.begin(), out.end(),
                   [](const SiteBytes& a, const SiteBytes& b) { return a.bytes > b.bytes; });
  return out;
}

Ranks compute_ranks(const Report& report) {
  Ranks r;
  if (report.processes.size() < 2) return r;
  for (size_t i = 0; i < report.processes.size(); ++i) {
    const ProcessReport& p = report.processes[i];
    RankEntry e;
    e.rank = p.info.rank;
    e.pid = p.info.pid;
    e.host = p.info.host;
    e.process = i;
    e.peak_bytes = p.summary.peak_bytes;
    e.leaked_bytes = p.summary.leaked_bytes;
    for (const SiteGroup& g : p.leaks)
      if (g.kind == "leak" && !g.suppressed) e.findings.push_back({"leak", g.id, g.bytes});
    for (const Growth& g : p.growth) {
      if (g.suppressed) continue;
      auto per_step = static_cast<int64_t>(g.bytes_per_step);
      if (g.basis == "steps") e.growth_bytes_per_step += per_step;  // per-bucket rates do not add up
      e.findings.push_back({"growth", g.id, static_cast<uint64_t>(std::max<int64_t>(per_step, 0))});
    }
    for (const Failure& f : p.failures)
      e.findings.push_back({"failed_allocation", std::string(format::api_name(f.event.api)), f.event.size});
    r.per_rank.push_back(std::move(e));
  }
  // Ranks in order; processes without a rank (-1) first, all ties by pid.
  std::stable_sort(r.per_rank.begin(), r.per_rank.end(), [](const RankEntry& a, const RankEntry& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.pid < b.pid;
  });
  for (size_t i = 1; i < r.per_rank.size(); ++i) {
    if (r.per_rank[i].peak_bytes > r.per_rank[r.heaviest].peak_bytes) r.heaviest = i;
    if (r.per_rank[i].peak_bytes < r.per_rank[r.lightest].peak_bytes) r.lightest = i;
  }
  if (r.heaviest == r.lightest) return r;

  // The sites whose bytes at the heavier rank's peak exceed the lighter rank's most.
  const ProcessReport& heavy = report.processes[r.per_rank[r.heaviest].process];
  const ProcessReport& light = report.processes[r.per_rank[r.lightest].process];
  std::unordered_map<std::string, const SiteBytes*> light_by_id;
  for (const SiteBytes& s : light.peak_sites) light_by_id.emplace(s.id, &s);
  for (const SiteBytes& s : heavy.peak_sites) {
    auto it = light_by_id.find(s.id);
    uint64_t other = it == light_by_id.end() ? 0 : it->second->bytes;
    if (s.bytes <= other) continue;
    r.sites.push_back(SiteDiff{s.id, static_cast<int64_t>(s.bytes - other), s.bytes, other, s.stack});
  }
  std::stable_sort(r.sites.begin(), r.sites.end(),
                   [](const SiteDiff& a, const SiteDiff& b) { return a.bytes_diff > b.bytes_diff; });
  if (r.sites.size() > Ranks::kMaxSites) r.sites.resize(Ranks::kMaxSites);
  return r;
}

}  // namespace gpumemshim::analyzer

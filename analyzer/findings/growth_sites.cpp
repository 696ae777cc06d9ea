#include "findings/growth_sites.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "findings/leaks.h"
#include "findings/memory_limit.h"
#include "report/analysis.h"
#include "report/stack_view.h"

namespace gpumemshim::analyzer {

std::string growth_unit(uint64_t window_allocations) {
  if (window_allocations == 0) return "step";
  return fmt::format("window of {} allocation{} per thread", window_allocations,
                     window_allocations == 1 ? "" : "s");
}

namespace {

uint64_t device_total(const LoadedTrace& trace, int32_t device) {
  for (const DeviceInfo& d : trace.devices)
    if (d.device == device && d.total_bytes) return d.total_bytes;
  const auto& tracks = trace.replay.devices().all();
  if (device >= 0 && static_cast<size_t>(device) < tracks.size() && tracks[static_cast<size_t>(device)].has_meminfo)
    return tracks[static_cast<size_t>(device)].meminfo_total;
  return 0;
}

// What the process may use on the device: its own cap when one is known, else the device total.
uint64_t capacity(const LoadedTrace& trace, int32_t device) {
  const uint64_t total = device_total(trace, device);
  const MemoryLimit limit = memory_limit(trace.attributes, device, total);
  return limit.known() ? limit.bytes : total;
}

// The raw sites whose series (SiteSampler::series) are not constant, from one pass over the
// sampler's log rather than a series per site.
std::vector<bool> varying_sites(const SiteSampler& sampler) {
  struct State {
    bool any = false;    // a value seen (else the series is 0 so far)
    bool shown = false;  // first holds the series' first value
    bool varies = false;
    size_t point = 0;  // where the latest value starts
    uint64_t first = 0;
    uint64_t latest = 0;  // shown unless a later value at the same point replaces it
  };
  std::vector<State> st(sampler.sites());
  auto show = [](State& s, uint64_t v) {
    s.varies = s.varies || (s.shown && v != s.first);
    if (!s.shown) s.first = v;
    s.shown = true;
  };
  sampler.for_each_value([&](uint32_t site, size_t point, uint64_t bytes) {
    State& s = st[site];
    if (!s.any) {
      if (point > 0) show(s, 0);  // 0 before the first value
    } else if (point != s.point) {
      show(s, s.latest);
    }
    s.any = true;
    s.point = point;
    s.latest = bytes;
  });
  std::vector<bool> varies(st.size());
  for (size_t i = 0; i < st.size(); ++i) {
    if (st[i].any) show(st[i], st[i].latest);
    varies[i] = st[i].varies;
  }
  return varies;
}

constexpr uint32_t kNoGroup = UINT32_MAX;

// Each group's series: the sum of its raw sites' series (group_of_raw[raw], kNoGroup: none), in
// one pass over the sampler's log. Its values come by point, each point's scattered over the
// sites; their changes go into a block of kBlock points by group (point-major: the additions of a
// point stay within a few kilobytes), flushed into the rows as running sums when the log moves
// past it (row-major additions missed the cache at nearly every value).
std::vector<std::vector<uint64_t>> group_series(const SiteSampler& sampler,
                                                const std::vector<uint32_t>& group_of_raw,
                                                size_t groups) {
  constexpr size_t kBlock = 8;  // points: a cache line of each row
  const size_t n_points = sampler.point_count();
  std::vector<std::vector<uint64_t>> y(groups, std::vector<uint64_t>(n_points));
  std::vector<uint64_t> block(kBlock * groups, 0), running(groups, 0);
  std::vector<uint64_t> last(group_of_raw.size(), 0);  // each raw site's value so far
  size_t block_start = 0;
  auto flush = [&] {
    const size_t end = std::min(block_start + kBlock, n_points);
    for (size_t g = 0; g < groups; ++g) {
      uint64_t sum = running[g];
      for (size_t p = block_start; p < end; ++p) {
        uint64_t& change = block[(p - block_start) * groups + g];
        y[g][p] = sum += change;  // wraps as the sum of the raw series would
        change = 0;
      }
      running[g] = sum;
    }
    block_start = end;
  };
  sampler.for_each_value([&](uint32_t raw, size_t point, uint64_t bytes) {
    const uint32_t g = raw < group_of_raw.size() ? group_of_raw[raw] : kNoGroup;
    if (g == kNoGroup) return;
    while (point >= block_start + kBlock) flush();
    block[(point - block_start) * groups + g] += bytes - last[raw];
    last[raw] = bytes;
  });
  while (block_start < n_points) flush();
  return y;
}

// The symbolized sites growth may find, each with the group of raw sites whose series it sums.
struct GrowthSite {
  uint32_t group = 0;  // its series: group_series()[group]
  RawSite raw;
  int32_t device = 0;
  std::vector<Frame> stack;
};
using GrowthSites = std::map<std::tuple<std::string, uint8_t, uint8_t, bool>, GrowthSite>;

// The raw sites of memory whose series vary, merged by symbolized stack; group_of_raw gets each
// raw site's group (kNoGroup: none).
GrowthSites growth_sites(const Replay& replay, const SiteSampler& sampler, StackView& stacks,
                         std::vector<uint32_t>& group_of_raw) {
  const bool has_torch = replay.summary().torch.events > 0;
  GrowthSites sites;
  const std::vector<bool> varies = varying_sites(sampler);
  group_of_raw.assign(varies.size(), kNoGroup);
  const std::vector<RawSite>& raws = replay.sites();
  for (uint32_t i = 0; i < raws.size() && i < varies.size(); ++i) {
    const RawSite& r = raws[i];
    if (!is_memory_kind(r.kind)) continue;
    // The allocator's cache grows with the tensors in it: the tensor sites are the finding.
    if (has_torch && !r.torch_block && (r.api == Api::kCudaMalloc || r.api == Api::kCuMemCreate)) continue;
    if (!varies[i]) continue;  // a constant series adds nothing to find
    const std::vector<Frame>& frames = stacks.frames(r.stack_id);
    auto [it, inserted] =
        sites.try_emplace({stacks.stable_key(r.stack_id), static_cast<uint8_t>(r.api),
                           static_cast<uint8_t>(r.kind), r.torch_block});
    GrowthSite& s = it->second;
    if (inserted) {
      s.group = static_cast<uint32_t>(sites.size() - 1);
      s.raw = r;
      s.device = replay.site_device(i);
      s.stack = frames;
    } else if (s.device != replay.site_device(i)) {
      s.device = -1;
    }
    group_of_raw[i] = s.group;
  }
  return sites;
}

// The finding of a site whose fit rises, with the step at which its device would be full.
Growth growth_of(const LoadedTrace& trace, const std::string& stack_key, GrowthSite& s,
                 const TrendFit& f, uint64_t window_allocations, uint64_t last_step) {
  Growth g;
  g.id = site_id_of(stack_key, s.raw.api, s.raw.torch_block);
  const bool by_steps = window_allocations == 0;
  g.basis = by_steps ? "steps" : "allocations";
  g.bytes_per_step = std::round(f.slope);
  g.window_allocations = window_allocations;
  g.unit = growth_unit(window_allocations);
  g.steps = f.points;
  g.warmup_steps = f.warmup;
  g.last_step = last_step;
  g.first_live_bytes = f.first_bytes;
  g.last_live_bytes = f.last_bytes;
  g.confidence = f.confidence;
  g.api = s.raw.api;
  g.memory = s.raw.kind;
  g.torch_block = s.raw.torch_block;
  g.device = s.device;
  g.pid = trace.process.pid;
  g.rank = trace.process.rank;
  g.stack = std::move(s.stack);
  // The process runs out when its peak plus this growth reaches what it may use.
  uint64_t total = capacity(trace, s.device < 0 ? 0 : s.device);
  uint64_t peak = trace.replay.summary().peak_bytes;
  if (total > peak && is_device_memory_kind(g.memory)) {
    g.has_projection = true;
    g.projected_oom_step =
        g.last_step + static_cast<uint64_t>(std::ceil(static_cast<double>(total - peak) / g.bytes_per_step));
  }
  return g;
}

}  // namespace

std::vector<Growth> find_growth(const LoadedTrace& trace, StackView& stacks) {
  const Replay& replay = trace.replay;
  const bool by_steps = replay.summary().steps > 0;
  const GrowthSampling& samples = replay.growth_samples();
  const SiteSampler& sampler = by_steps ? samples.step_samples() : samples.window_samples();
  const std::vector<uint64_t> x = sampler.points();
  if (x.size() < 5) return {};
  const uint64_t window_allocations = by_steps ? 0 : samples.window_allocations();

  std::vector<uint32_t> group_of_raw;
  GrowthSites sites = growth_sites(replay, sampler, stacks, group_of_raw);
  const std::vector<std::vector<uint64_t>> y = group_series(sampler, group_of_raw, sites.size());
  std::vector<Growth> out;
  for (auto& [key, s] : sites) {
    // Growth ends higher than where its fit starts (after the warm-up, TrendFit's first_bytes):
    // checked before the O(n^2) fit, which a site that does not rise never needs.
    const std::vector<uint64_t>& sy = y[s.group];
    const size_t warmup = trend_warmup(sy.size());
    if (sy.size() <= warmup || sy.back() <= sy[warmup]) continue;
    TrendFit f = fit_trend(x, sy);
    if (f.points == 0 || f.slope < 1.0 || f.confidence < kMinGrowthConfidence) continue;
    out.push_back(growth_of(trace, std::get<0>(key), s, f, window_allocations, x.back()));
  }
  std::sort(out.begin(), out.end(), [](const Growth& a, const Growth& b) {
    if (a.bytes_per_step != b.bytes_per_step) return a.bytes_per_step > b.bytes_per_step;
    return a.id < b.id;
  });
  return out;
}

}  // namespace gpumemshim::analyzer

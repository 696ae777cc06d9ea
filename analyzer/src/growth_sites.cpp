// Growth findings of one process: the sampled live bytes of raw sites summed per symbolized site,
// fitted, and kept when they rise steadily.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "gpumemshim/analyzer/analysis.h"
#include "gpumemshim/analyzer/stack_view.h"

namespace gpumemshim::analyzer {

namespace {

uint64_t device_total(const LoadedTrace& trace, int32_t device) {
  for (const DeviceInfo& d : trace.devices)
    if (d.device == device && d.total_bytes) return d.total_bytes;
  const auto& tracks = trace.replay.devices();
  if (device >= 0 && static_cast<size_t>(device) < tracks.size() && tracks[static_cast<size_t>(device)].has_meminfo)
    return tracks[static_cast<size_t>(device)].meminfo_total;
  return 0;
}

}  // namespace

std::vector<Growth> find_growth(const LoadedTrace& trace, StackView& stacks) {
  const Replay& replay = trace.replay;
  const bool by_steps = replay.summary().steps > 0;
  const bool has_torch = replay.summary().torch.events > 0;
  SiteSampler time_samples{kMaxTimePoints};
  if (!by_steps) time_samples = replay.time_samples_closed();
  const SiteSampler& sampler = by_steps ? replay.step_samples() : time_samples;
  std::vector<uint64_t> x = sampler.points();
  if (x.size() < 5) return {};
  // Time buckets are counted in buckets of the final stride, not in ticks.
  const uint64_t stride = by_steps ? 1 : sampler.stride();
  if (!by_steps)
    for (uint64_t& v : x) v = (v + stride - 1) / stride;

  struct Site {
    std::vector<uint64_t> y;
    RawSite raw;
    int32_t device = 0;
    std::vector<Frame> stack;
  };
  std::map<std::tuple<std::string, uint8_t, uint8_t, bool>, Site> sites;
  const std::vector<RawSite>& raws = replay.sites();
  for (uint32_t i = 0; i < raws.size(); ++i) {
    const RawSite& r = raws[i];
    if (!is_memory_kind(r.kind)) continue;
    // The allocator's cache grows with the tensors in it: the tensor sites are the finding.
    if (has_torch && !r.torch_block && (r.api == Api::kCudaMalloc || r.api == Api::kCuMemCreate)) continue;
    std::vector<uint64_t> y = sampler.series(i);
    if (std::all_of(y.begin(), y.end(), [&](uint64_t v) { return v == y.front(); })) continue;
    const std::vector<Frame>& frames = stacks.frames(r.stack_id);
    auto [it, inserted] = sites.try_emplace({StackView::stable_key(frames), static_cast<uint8_t>(r.api),
                                             static_cast<uint8_t>(r.kind), r.torch_block});
    Site& s = it->second;
    if (inserted) {
      s.y.assign(y.size(), 0);
      s.raw = r;
      s.device = replay.site_device(i);
      s.stack = frames;
    } else if (s.device != replay.site_device(i)) {
      s.device = -1;
    }
    for (size_t j = 0; j < y.size(); ++j) s.y[j] += y[j];
  }

  std::vector<Growth> out;
  for (auto& [key, s] : sites) {
    // Growth ends higher than where its fit starts (after the warm-up, TrendFit's first_bytes):
    // checked before the O(n^2) fit, which a site that does not rise never needs.
    const size_t warmup = trend_warmup(s.y.size());
    if (s.y.size() <= warmup || s.y.back() <= s.y[warmup]) continue;
    TrendFit f = fit_trend(x, s.y);
    if (f.points == 0 || f.slope < 1.0 || f.confidence < kMinGrowthConfidence) continue;
    Growth g;
    g.id = site_id_of(std::get<0>(key), s.raw.api, s.raw.torch_block);
    g.basis = by_steps ? "steps" : "time";
    g.bytes_per_step = std::round(f.slope);
    g.bucket_s = by_steps ? 0 : static_cast<double>(stride * replay.time_tick_ns()) / 1e9;
    g.steps = f.points;
    g.warmup_steps = f.warmup;
    g.last_step = x.back();
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
    // The device fills up when the process's peak plus this growth reaches its total.
    uint64_t total = device_total(trace, s.device < 0 ? 0 : s.device);
    uint64_t peak = replay.summary().peak_bytes;
    if (total > peak && is_device_memory_kind(g.memory)) {
      g.has_projection = true;
      g.projected_oom_step =
          g.last_step + static_cast<uint64_t>(std::ceil(static_cast<double>(total - peak) / g.bytes_per_step));
    }
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const Growth& a, const Growth& b) {
    if (a.bytes_per_step != b.bytes_per_step) return a.bytes_per_step > b.bytes_per_step;
    return a.id < b.id;
  });
  return out;
}

}  // namespace gpumemshim::analyzer

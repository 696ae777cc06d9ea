#include "findings/growth_windows.h"

#include <algorithm>
#include <utility>

namespace gpumemshim::analyzer {

void AllocationWindows::merge() {
  ++shift_;
  FlatMap<uint64_t, uint64_t, IdentityHash> merged;
  changes_.for_each([&](uint64_t k, uint64_t delta) {
    *merged.try_emplace(key((k >> 32) >> 1, static_cast<uint32_t>(k))).first += delta;
  });
  changes_ = std::move(merged);
  last_window_ >>= 1;
}

SiteSampler AllocationWindows::samples(size_t sites) const {
  // Every window is kept: the sampler thins nothing below its max_points.
  SiteSampler sampler(kMaxWindows);
  if (changes_.size() == 0) return sampler;
  std::vector<std::pair<uint64_t, uint64_t>> changes;  // (key, delta), by window
  changes.reserve(changes_.size());
  changes_.for_each([&](uint64_t k, uint64_t delta) { changes.emplace_back(k, delta); });
  std::sort(changes.begin(), changes.end());
  std::vector<uint64_t> live(sites, 0);
  size_t i = 0;
  for (uint64_t window = 0; window <= last_window_; ++window) {
    for (; i < changes.size() && (changes[i].first >> 32) == window; ++i) {
      const auto site = static_cast<uint32_t>(changes[i].first);
      if (site >= live.size()) live.resize(site + size_t{1}, 0);
      live[site] += changes[i].second;
      sampler.touch(site);
    }
    sampler.boundary(window + 1, live);
  }
  return sampler;
}

}  // namespace gpumemshim::analyzer

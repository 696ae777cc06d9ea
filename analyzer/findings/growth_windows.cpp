#include "findings/growth_windows.h"

#include <algorithm>

namespace gpumemshim::analyzer {

void AllocationWindows::switch_thread(uint64_t thread_id) {
  auto [index, inserted] = thread_index_.try_emplace(thread_id);
  if (inserted) {
    *index = static_cast<uint32_t>(counts_.size());
    counts_.push_back(0);
  }
  current_ = *index;
  recent_[(thread_id * 0x9E3779B97F4A7C15ull) >> (64 - kRecentBits)] = Recent{thread_id, *index};
}

void AllocationWindows::settle_trailing() {
  for (const Entry& e : trailing_) add(e.first >> 32, static_cast<uint32_t>(e.first), e.second);
  trailing_.clear();
}

void AllocationWindows::reopen(Open& o, uint64_t window, uint32_t site) {
  if (o.window != kNoWindow && o.bytes != 0) {
    log_.emplace_back(key(o.window, site), o.bytes);
    if (log_.size() >= compact_at_) {
      compact(log_);
      compact_at_ = std::max(compact_at_, 2 * log_.size());
    }
  }
  o = Open{window, 0};
}

void AllocationWindows::compact(std::vector<Entry>& log) {
  std::sort(log.begin(), log.end(),
            [](const Entry& a, const Entry& b) { return a.first < b.first; });
  size_t out = 0;
  for (size_t i = 0; i < log.size();) {
    Entry sum = log[i++];
    for (; i < log.size() && log[i].first == sum.first; ++i) sum.second += log[i].second;
    if (sum.second != 0) log[out++] = sum;
  }
  log.resize(out);
}

void AllocationWindows::merge() {
  ++shift_;
  // The open windows go to the log: merged, they would no longer be in their slots.
  for (size_t slot = 0; slot < open_.size(); ++slot) {
    const Open& o = open_[slot];
    if (o.window != kNoWindow && o.bytes != 0)
      log_.emplace_back(key(o.window, static_cast<uint32_t>(slot / kOpenSlots)), o.bytes);
    open_[slot] = Open{};
  }
  for (Entry& e : log_) e.first = key((e.first >> 32) >> 1, static_cast<uint32_t>(e.first));
  compact(log_);
  last_window_ >>= 1;
}

SiteSampler AllocationWindows::samples(size_t sites) const {
  // Every window is kept: the sampler thins nothing below its max_points.
  SiteSampler sampler(kMaxWindows);
  std::vector<Entry> changes = log_;
  for (size_t slot = 0; slot < open_.size(); ++slot)
    if (const Open& o = open_[slot]; o.window != kNoWindow && o.bytes != 0)
      changes.emplace_back(key(o.window, static_cast<uint32_t>(slot / kOpenSlots)), o.bytes);
  if (changes.empty()) return sampler;
  compact(changes);
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

// What the timeline needs of the replay besides the clock and the raw sites: memory over time
// (TimelineSampler), and each call site's own peak where a call site is made of several raw sites
// (they symbolize alike): either the sums of groups of sites given before the replay
// (set_site_groups), or a log of every timeline site's changes, from which any grouping's peaks
// are computed afterwards without reading the trace again. A timeline site is a raw site of
// device memory (not a tensor block): the sites that make up live device bytes.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "findings/timeline_samples.h"

namespace gpumemshim::analyzer {

class TimelineTracker {
 public:
  static constexpr uint32_t kNoGroup = UINT32_MAX;
  // The log is complete with at most kMaxSiteLog changes, sites below 2^24 and changes below
  // 2^39 bytes. Real traces group raw stacks that differ only in the shim's own frames into one
  // call site, so this is the usual case.
  static constexpr size_t kMaxSiteLog = size_t{1} << 21;  // 16 MiB of log at most

  // Groups of timeline sites (site -> group, kNoGroup: none), set before the replay: each group's
  // highest sum of live bytes is then tracked.
  void set_site_groups(std::vector<uint32_t> group_of);
  uint32_t group_of(uint32_t site) const {
    return site < group_of_.size() ? group_of_[site] : kNoGroup;
  }
  bool grouping() const { return !groups_.live.empty(); }
  // Raw sites 0 .. count-1 may change from now on.
  void sites(size_t count) { sampler_.sites(count); }
  // A timeline site's live bytes are now `bytes`, changed by `delta`.
  [[gnu::always_inline]] void site_changed(uint32_t site, uint64_t bytes, int64_t delta) {
    sampler_.site_changed(site, bytes);
    log_site_change(site, delta);
  }
  // A group's bytes change by `delta` (modulo 2^64: a decrease is its negation).
  void group_changed(uint32_t group, uint64_t delta) { groups_.change(group, delta); }
  // The state after an event that changed device or allocator bytes.
  void point(uint64_t time_ns, uint64_t live, uint64_t reserved, uint64_t allocated) {
    sampler_.point(time_ns, live, reserved, allocated);
  }
  void finish() { sampler_.finish(); }

  const TimelineSampler& samples() const { return sampler_; }
  const std::vector<uint64_t>& group_peaks() const { return groups_.peak; }
  bool site_log_complete() const { return log_on_; }
  // The peaks of any grouping, from the log (when complete).
  std::vector<uint64_t> group_peaks_from_log(const std::vector<uint32_t>& group_of) const;

 private:
  // Running sums of live bytes per group of sites and their highest values.
  struct GroupSums {
    explicit GroupSums(const std::vector<uint32_t>& group_of = {});  // as many as the highest group
    void change(uint32_t g, uint64_t delta) {
      live[g] += delta;
      peak[g] = std::max(peak[g], live[g]);
    }
    std::vector<uint64_t> live, peak;
  };
  // One change in 8 bytes: the site in the top 24 bits, the signed change in the low 40.
  static constexpr int kDeltaBits = 40;
  [[gnu::always_inline]] void log_site_change(uint32_t site, int64_t delta) {
    if (!log_on_) return;
    constexpr int64_t kLimit = int64_t{1} << (kDeltaBits - 1);
    if (log_.size() == kMaxSiteLog || site >= (1u << (64 - kDeltaBits)) || delta >= kLimit ||
        delta <= -kLimit) {  // does not fit: the timeline reads the trace again instead
      log_on_ = false;
      log_ = {};
      return;
    }
    log_.push_back((uint64_t{site} << kDeltaBits) |
                   (static_cast<uint64_t>(delta) & ((uint64_t{1} << kDeltaBits) - 1)));
  }

  TimelineSampler sampler_;
  std::vector<uint64_t> log_;  // timeline sites' changes in replay order
  bool log_on_ = true;
  std::vector<uint32_t> group_of_;
  GroupSums groups_;
};

}  // namespace gpumemshim::analyzer

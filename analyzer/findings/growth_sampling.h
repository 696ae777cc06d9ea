// What growth is found from: every raw site's live bytes at step boundaries, or, in a trace
// without step markers, at equal time buckets (SiteSampler each), and the times of the first
// steps (the timeline's step marks). The replay's core feeds it each change of a site's bytes,
// each step marker and each time bucket an event closes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "findings/growth.h"

namespace gpumemshim::analyzer {

class GrowthSampling {
 public:
  static constexpr size_t kMaxStepTimes = 10000;  // step times kept

  GrowthSampling() : next_kept_ns_(time_sampler_.stride() * kTimeTickNs) {}

  // A sampler that wants touches needs to hear of a site once after each of its boundaries: both
  // samplers' boundaries bump one stamp, which the core keeps per site beside the site's other
  // per-change data (one cache line), so a change costs one comparison until the next boundary,
  // and none while neither sampler wants touches.
  bool wants_touch(uint64_t site_stamp) const { return touching_ && site_stamp != stamp_; }
  // The site's bytes are changing: the samplers hear of it. Returns the site's new stamp.
  [[gnu::noinline]] uint64_t touch(uint32_t site) {
    step_sampler_.touch(site);
    time_sampler_.touch(site);
    return stamp_;
  }
  // Counts every change of a site's bytes (the samplers choose between touches and comparing
  // every site by it).
  void changed() { ++changes_; }

  // Whether an event at time_ns lies past a time bucket the time sampler keeps apart from the
  // latest event's: then close_buckets() before the event changes anything.
  bool closes_bucket(uint64_t time_ns) const { return time_ns >= next_kept_ns_; }
  void close_buckets(uint64_t time_ns, uint64_t last_event_ns, const std::vector<uint64_t>& live);
  // Step marker number `index` (from 1) at time_ns; live holds every site's bytes now.
  void step(uint64_t index, uint64_t time_ns, const std::vector<uint64_t>& live);
  // After the last event (the latest at last_event_ns): the step not yet given to its sampler,
  // and the open time bucket. The samples are complete from then on.
  void finish(uint64_t last_event_ns, const std::vector<uint64_t>& live);

  const SiteSampler& step_samples() const { return step_sampler_; }
  const SiteSampler& time_samples() const { return time_sampler_; }
  static constexpr uint64_t time_tick_ns() { return kTimeTickNs; }
  // The times of the first kMaxStepTimes steps.
  const std::vector<uint64_t>& step_times() const { return step_times_; }

 private:
  void new_stamp() {
    ++stamp_;
    touching_ = step_sampler_.wants_touches() || time_sampler_.wants_touches();
  }

  uint64_t stamp_ = 1;    // a site's stamp starts at 0: unseen
  bool touching_ = true;  // a sampler wants touches (SiteSampler::wants_touches)
  uint64_t changes_ = 0;  // changed() calls so far
  SiteSampler step_sampler_{kMaxStepPoints};
  // A step boundary the step sampler has not seen (step(): a later one overwrites its kept point
  // unless it is the last): every site's bytes then, given to the sampler by finish() when no
  // step came after it. Index 0: none.
  uint64_t pending_step_ = 0, pending_step_changes_ = 0;
  std::vector<uint64_t> pending_step_live_;
  SiteSampler time_sampler_{kMaxTimePoints};
  // The time from which an event is in a time bucket the time sampler keeps apart from the last
  // event's (every stride()-th bucket of kTimeTickNs is kept).
  uint64_t next_kept_ns_ = 0;
  std::vector<uint64_t> step_times_;
};

}  // namespace gpumemshim::analyzer

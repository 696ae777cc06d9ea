// What growth is found from: every raw site's live bytes at step boundaries (SiteSampler), or, in
// a trace without step markers, at the ends of windows of each thread's allocations
// (AllocationWindows), and the times of the first steps (the timeline's step marks). The replay's
// core feeds it each change of a site's bytes, the thread of each event and each step marker.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "findings/growth.h"
#include "findings/growth_windows.h"

namespace gpumemshim::analyzer {

class GrowthSampling {
 public:
  static constexpr size_t kMaxStepTimes = 10000;  // step times kept

  // A sampler that wants touches needs to hear of a site once after each of its boundaries: its
  // boundaries bump one stamp, which the core keeps per site beside the site's other
  // per-change data (one cache line), so a change costs one comparison until the next boundary,
  // and none while the sampler wants no touches.
  bool wants_touch(uint64_t site_stamp) const { return touching_ && site_stamp != stamp_; }
  // The site's bytes are changing: the step sampler hears of it. Returns the site's new stamp.
  [[gnu::noinline]] uint64_t touch(uint32_t site) {
    step_sampler_.touch(site);
    return stamp_;
  }
  // Counts every change of a site's bytes (the step sampler chooses between touches and comparing
  // every site by it).
  void changed() { ++changes_; }

  // Allocation windows matter only until the first step marker (a trace with steps is sampled by
  // step): from then on they cost one test per event.
  // The thread of the events that follow.
  void thread(uint64_t thread_id) {
    if (!stepped_) windows_.thread(thread_id);
  }
  // An allocation at site (on the current thread): the tag its record keeps for freed().
  AllocationWindows::Tag allocated(uint32_t site, uint64_t bytes) {
    return stepped_ ? 0 : windows_.allocated(site, bytes);
  }
  void freed(uint32_t site, uint64_t bytes, AllocationWindows::Tag tag) {
    if (!stepped_) windows_.freed(site, bytes, tag);
  }
  // Step marker number `index` (from 1) at time_ns; live holds every site's bytes now.
  void step(uint64_t index, uint64_t time_ns, const std::vector<uint64_t>& live);
  // After the last event: the step not yet given to its sampler, and the windows' samples (sites:
  // how many raw sites there are). The samples are complete from then on.
  void finish(size_t sites);

  const SiteSampler& step_samples() const { return step_sampler_; }
  // Without step markers: every site's live bytes at the end of each window.
  const SiteSampler& window_samples() const { return window_sampler_; }
  // Allocations per window (of each thread).
  uint64_t window_allocations() const { return window_allocations_; }
  // The times of the first kMaxStepTimes steps.
  const std::vector<uint64_t>& step_times() const { return step_times_; }

 private:
  void new_stamp() {
    ++stamp_;
    touching_ = step_sampler_.wants_touches();
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
  bool stepped_ = false;  // a step marker came
  AllocationWindows windows_;
  SiteSampler window_sampler_{AllocationWindows::kMaxWindows};
  uint64_t window_allocations_ = 1;
  std::vector<uint64_t> step_times_;
};

}  // namespace gpumemshim::analyzer

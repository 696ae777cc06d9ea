#include "findings/growth_sampling.h"

namespace gpumemshim::analyzer {

// The sampler keeps every stride()-th step boundary, and of the boundaries between two kept ones
// the last one's values hold. While it compares every site at a boundary (no touches), a boundary
// the next kept one will overwrite costs a copy of the sites' bytes instead (a comparison and a log
// entry per changed site: most of them, in a busy training step), kept in case no step follows.
// The samples are the same either way; while it takes touches, a boundary costs only the sites
// changed and is given at once.
void GrowthSampling::step(uint64_t index, uint64_t time_ns, const std::vector<uint64_t>& live) {
  if (step_times_.size() < kMaxStepTimes) step_times_.push_back(time_ns);
  if (!stepped_) windows_ = AllocationWindows();  // never read from now on
  stepped_ = true;
  if (!step_sampler_.wants_touches() && index % step_sampler_.stride() != 0) {
    pending_step_live_.assign(live.begin(), live.end());
    pending_step_ = index;
    pending_step_changes_ = changes_;
    return;
  }
  pending_step_ = 0;
  step_sampler_.boundary(index, live, changes_);
  new_stamp();
}

void GrowthSampling::finish(size_t sites) {
  if (pending_step_ != 0)
    step_sampler_.boundary(pending_step_, pending_step_live_, pending_step_changes_);
  pending_step_ = 0;
  if (!stepped_) {
    window_sampler_ = windows_.samples(sites);
    window_allocations_ = windows_.window_allocations();
  }
}

}  // namespace gpumemshim::analyzer

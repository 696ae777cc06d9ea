#include "findings/growth_sampling.h"

namespace gpumemshim::analyzer {

// The state before this event is the state at the end of every bucket since the last event. The
// sampler keeps one value per `stride` buckets (the last one written wins), so only a boundary
// whose kept bucket the next one would not write again is written: one call per kept bucket
// instead of one per microsecond of the trace, and per event one comparison with the time it
// takes.
void GrowthSampling::close_buckets(uint64_t time_ns, uint64_t last_event_ns,
                                   const std::vector<uint64_t>& live) {
  time_sampler_.boundary(last_event_ns / kTimeTickNs + 1, live, changes_);
  new_stamp();
  const uint64_t k = time_sampler_.stride();  // it may have grown
  next_kept_ns_ = (time_ns / kTimeTickNs / k + 1) * k * kTimeTickNs;
}

// The sampler keeps every stride()-th step boundary, and of the boundaries between two kept ones
// the last one's values hold. While it compares every site at a boundary (no touches), a boundary
// the next kept one will overwrite costs a copy of the sites' bytes instead (a comparison and a log
// entry per changed site: most of them, in a busy training step), kept in case no step follows.
// The samples are the same either way; while it takes touches, a boundary costs only the sites
// changed and is given at once.
void GrowthSampling::step(uint64_t index, uint64_t time_ns, const std::vector<uint64_t>& live) {
  if (step_times_.size() < kMaxStepTimes) step_times_.push_back(time_ns);
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

void GrowthSampling::finish(uint64_t last_event_ns, const std::vector<uint64_t>& live) {
  if (pending_step_ != 0)
    step_sampler_.boundary(pending_step_, pending_step_live_, pending_step_changes_);
  pending_step_ = 0;
  time_sampler_.boundary(last_event_ns / kTimeTickNs + 1, live, changes_);  // the open bucket
}

}  // namespace gpumemshim::analyzer

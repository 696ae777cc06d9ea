// The process's peaks: live device bytes and live tensor blocks at their highest, when each was
// reached, how much of each the step in progress had made (activations and temporaries), and what
// each raw site held at the device peak (PeakSiteTracker). Fed by the replay's core.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "findings/peak_sites.h"

namespace gpumemshim::analyzer {

class Peaks {
 public:
  // Before a raw site's bytes change: live[site] is its value before the change.
  void before_change(uint32_t site, const std::vector<uint64_t>& live) {
    sites_.before_change(site, live);
  }
  // Device memory was allocated; `live` is the process's live device bytes after it. Returns
  // whether that is a new peak.
  bool device_alloc(uint64_t size, uint64_t live, uint64_t time_ns) {
    in_step_ += size;
    if (live <= bytes_) return false;
    bytes_ = live;
    sites_.new_peak();
    in_step_at_peak_ = in_step_;
    time_ns_ = time_ns;
    return true;
  }
  // Device memory was freed; made_this_step: it was allocated since the last step marker.
  void device_free(uint64_t size, bool made_this_step) {
    if (made_this_step) in_step_ -= std::min(in_step_, size);
  }
  // A tensor block was allocated; `live` is the live tensor blocks' bytes after it.
  void torch_alloc(uint64_t size, uint64_t live, uint64_t time_ns) {
    torch_in_step_ += size;
    if (live > torch_bytes_) {
      torch_bytes_ = live;
      torch_in_step_at_peak_ = torch_in_step_;
      torch_time_ns_ = time_ns;
    }
  }
  void torch_free(uint64_t size, bool made_this_step) {
    if (made_this_step) torch_in_step_ -= std::min(torch_in_step_, size);
  }
  // A step marker: what is live now was made in earlier steps.
  void step() { in_step_ = torch_in_step_ = 0; }

  uint64_t device_bytes() const { return bytes_; }
  uint64_t time_ns() const { return time_ns_; }  // when device_bytes() was reached
  // At the device peak: the bytes allocated since the last step marker and still live.
  uint64_t in_step_bytes() const { return in_step_at_peak_; }
  uint64_t torch_bytes() const { return torch_bytes_; }  // the peak of live tensor blocks
  uint64_t torch_time_ns() const { return torch_time_ns_; }
  uint64_t torch_in_step_bytes() const { return torch_in_step_at_peak_; }
  // What each raw site held at the device peak (at_peak(the core's site_live())).
  const PeakSiteTracker& sites() const { return sites_; }

 private:
  PeakSiteTracker sites_;
  uint64_t bytes_ = 0, time_ns_ = 0, in_step_ = 0, in_step_at_peak_ = 0;
  uint64_t torch_bytes_ = 0, torch_time_ns_ = 0, torch_in_step_ = 0, torch_in_step_at_peak_ = 0;
};

}  // namespace gpumemshim::analyzer

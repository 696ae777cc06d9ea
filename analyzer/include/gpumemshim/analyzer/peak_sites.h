// What each raw allocation site (the replay's site index) held at the moment the process's device
// memory peaked. Exact and O(1) per event: instead of copying every site at each new peak, a
// site's value at the last peak is copied lazily, right before the site first changes after that
// peak; a site that never changes again still holds its peak value at the end.
#pragma once
#include <cstdint>
#include <vector>

namespace gpumemshim::analyzer {

class PeakSiteTracker {
 public:
  // Call before a site's live bytes change; live_now is its value before the change.
  void before_change(uint32_t site, uint64_t live_now) {
    if (site >= epoch_of_.size()) {
      // New sites held nothing at every earlier peak.
      epoch_of_.resize(site + 1, epoch_);
      at_peak_.resize(site + 1, 0);
    }
    if (epoch_of_[site] != epoch_) {
      at_peak_[site] = live_now;
      epoch_of_[site] = epoch_;
    }
  }
  // The process's live device bytes just reached a new maximum (after the change that did it).
  void new_peak() { ++epoch_; }
  bool has_peak() const { return epoch_ > 0; }
  // Bytes per site at the last peak, given every site's live bytes now.
  std::vector<uint64_t> at_peak(const std::vector<uint64_t>& live_now) const {
    std::vector<uint64_t> out(live_now.size(), 0);
    if (epoch_ == 0) return out;
    for (size_t s = 0; s < out.size(); ++s)
      out[s] = s < epoch_of_.size() && epoch_of_[s] == epoch_ ? at_peak_[s] : live_now[s];
    return out;
  }

 private:
  std::vector<uint64_t> epoch_of_;  // the peak at which at_peak_ was last synced
  std::vector<uint64_t> at_peak_;
  uint64_t epoch_ = 0;
};

}  // namespace gpumemshim::analyzer

// What each raw allocation site (the replay's site index) held at the moment the process's device
// memory peaked. Exact and O(1) per event, with no work per site at a new peak (a trace that keeps
// rising reaches one every few thousand events): each change after the last peak is logged with
// the site's value before it, and the values at the peak are today's with the log undone. A log
// that grows long (the peak is behind, many events ago) is settled into those values once, and
// nothing more is logged until the next peak.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpumemshim::analyzer {

class PeakSiteTracker {
 public:
  static constexpr size_t kMaxLog = 4096;  // entries before settling: 64 KiB, cache-resident

  // Call before a site's live bytes change: live[site] is its value before the change, live
  // every site's value now.
  void before_change(uint32_t site, const std::vector<uint64_t>& live) {
    if (!logging_) return;
    log_.push_back(Change{site, live[site]});
    if (log_.size() == kMaxLog) settle(live);
  }
  // The process's live device bytes just reached a new maximum (after the change that did it).
  void new_peak() {
    ++peaks_;
    log_.clear();
    logging_ = true;
  }
  bool has_peak() const { return peaks_ > 0; }
  // Bytes per site at the last peak, given every site's live bytes now.
  std::vector<uint64_t> at_peak(const std::vector<uint64_t>& live_now) const {
    std::vector<uint64_t> out(live_now.size(), 0);
    if (peaks_ == 0) return out;
    if (logging_) {
      out = live_now;
      undo(out);
    } else {  // sites new since the settling held nothing at the peak
      for (size_t s = 0; s < out.size() && s < settled_.size(); ++s) out[s] = settled_[s];
    }
    return out;
  }

 private:
  struct Change {
    uint32_t site;
    uint64_t before;
  };
  void undo(std::vector<uint64_t>& values) const {
    for (auto c = log_.rbegin(); c != log_.rend(); ++c) values[c->site] = c->before;
  }
  void settle(const std::vector<uint64_t>& live) {
    settled_ = live;
    undo(settled_);
    log_.clear();
    logging_ = false;
  }

  std::vector<Change> log_;  // the changes since the last peak (logging_)
  bool logging_ = false;
  std::vector<uint64_t> settled_;  // !logging_: the values at the last peak (sites known then)
  uint64_t peaks_ = 0;
};

}  // namespace gpumemshim::analyzer

// Growth without step markers: windows of allocations, counted on each thread's own clock.
//
// Wall time is no clock for growth: the same program cuts into a different number of time
// buckets on an idle and on a loaded machine, and how its threads interleave moves what is live at
// any instant. Each thread's own sequence of allocations is the program's, whatever the scheduler
// does. So every thread counts its allocations, and window w of a thread is its allocations
// w * N .. (w + 1) * N - 1; the end of window w is, for every thread, the moment just before its
// allocation (w + 1) * N (or its last event). A site's sample at window w is what is live at the
// end of window w on every thread's clock: the bytes allocated in windows up to w less those freed
// in windows up to w. A free belongs to the window of its thread's latest allocation, and never to
// one before its allocation's (a free on another thread whose clock is behind).
//
// N doubles (adjacent windows merge) whenever a thread reaches window kMaxWindows, so the number of
// windows, kMaxWindows / 2 + 1 .. kMaxWindows, depends on the busiest thread's allocation count
// alone. Memory: one entry per site and window it changed in.
#pragma once
#include <cstdint>
#include <vector>

#include "findings/growth.h"
#include "replay/flat_map.h"

namespace gpumemshim::analyzer {

class AllocationWindows {
 public:
  static constexpr uint64_t kMaxWindows = 64;

  // Where an allocation is, for its free: its window when it was made and the window size then
  // (log2), so that later merges can be applied to it.
  using Tag = uint16_t;

  // The thread of the events that follow.
  void thread(uint64_t thread_id) {
    if (thread_id == thread_) return;
    *clocks_.try_emplace(thread_).first = count_;
    thread_ = thread_id;
    const uint64_t* c = clocks_.find(thread_id);
    count_ = c ? *c : 0;
  }
  // An allocation of bytes at site on the current thread: its tag.
  Tag allocated(uint32_t site, uint64_t bytes) {
    if ((count_ >> shift_) >= kMaxWindows) [[unlikely]]
      merge();
    const uint64_t window = count_ >> shift_;
    ++count_;
    add(window, site, bytes);
    return static_cast<Tag>(window | (shift_ << 8));
  }
  // The allocation tagged `tag` of bytes at site is freed on the current thread.
  void freed(uint32_t site, uint64_t bytes, Tag tag) {
    const uint64_t made = window_of(tag);
    const uint64_t now = count_ == 0 ? 0 : (count_ - 1) >> shift_;
    add(now > made ? now : made, site, uint64_t{0} - bytes);
  }

  // Allocations per window.
  uint64_t window_allocations() const { return uint64_t{1} << shift_; }
  // The windows' samples: window w is the sampler's boundary w + 1, every site's live bytes at its
  // end. sites: one more than the highest site index.
  SiteSampler samples(size_t sites) const;

 private:
  static uint64_t key(uint64_t window, uint32_t site) { return window << 32 | site; }
  void add(uint64_t window, uint32_t site, uint64_t delta) {
    *changes_.try_emplace(key(window, site)).first += delta;
    if (window > last_window_) last_window_ = window;
  }
  uint64_t window_of(Tag tag) const {
    const uint64_t made_shift = tag >> 8;
    return (uint64_t{tag} & 0xff) >> (shift_ - made_shift);
  }
  void merge();  // N doubles: windows 2w and 2w + 1 become w

  struct IdentityHash {  // FlatMap::hash mixes the bits itself
    size_t operator()(uint64_t v) const noexcept { return static_cast<size_t>(v); }
  };
  FlatMap<uint64_t, uint64_t, IdentityHash> clocks_;   // thread -> its allocations so far
  FlatMap<uint64_t, uint64_t, IdentityHash> changes_;  // (window, site) -> bytes added (wrapping)
  uint64_t thread_ = 0;  // the current thread, whose count is count_ (not in clocks_ meanwhile)
  uint64_t count_ = 0;
  uint64_t shift_ = 0;  // N = 2^shift_
  uint64_t last_window_ = 0;
};

}  // namespace gpumemshim::analyzer

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
// one before its allocation's (a free on another thread whose clock is behind). Frees after the
// process's last allocation are its teardown (Python releasing a function's locals and the globals
// at exit): they end the run, not its trend, and are left out of every window.
//
// N doubles (adjacent windows merge) whenever a thread reaches window kMaxWindows, so the number of
// windows, kMaxWindows / 2 + 1 .. kMaxWindows (one per allocation while the busiest thread has
// made fewer), depends on the busiest thread's allocation count alone.
//
// Cost per change: each site has a few open windows (its latest ones, one per window modulo
// kOpenSlots: threads a few windows apart share a site without evicting each other) whose bytes
// add up in place; a change to a window whose slot holds another files that one's sum in a log,
// which is sorted and summed by (window, site) whenever it has doubled, so memory stays within
// about twice one entry per site and window it changed in. (A hash lookup per change cost the
// load phase a third more instructions per event.)
#pragma once
#include <array>
#include <cstdint>
#include <utility>
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

  AllocationWindows() { *thread_index_.try_emplace(thread_).first = 0; }  // counts_[0]

  // The thread of the events that follow.
  void thread(uint64_t thread_id) {
    if (thread_id == thread_) return;
    // Threads take turns event by event: most switches find the thread in a small cache.
    const Recent& r = recent_[(thread_id * 0x9E3779B97F4A7C15ull) >> (64 - kRecentBits)];
    thread_ = thread_id;
    if (r.thread == thread_id) [[likely]]
      current_ = r.index;
    else
      switch_thread(thread_id);
  }
  // An allocation of bytes at site on the current thread: its tag.
  Tag allocated(uint32_t site, uint64_t bytes) {
    if (!trailing_.empty()) [[unlikely]]
      settle_trailing();
    uint64_t& count = counts_[current_];
    if ((count >> shift_) >= kMaxWindows) [[unlikely]]
      merge();
    const uint64_t window = count >> shift_;
    ++count;
    add(window, site, bytes);
    return static_cast<Tag>(window | (shift_ << 8));
  }
  // The allocation tagged `tag` of bytes at site is freed on the current thread.
  void freed(uint32_t site, uint64_t bytes, Tag tag) {
    const uint64_t made = window_of(tag);
    const uint64_t count = counts_[current_];
    const uint64_t now = count == 0 ? 0 : (count - 1) >> shift_;
    // Held back until the next allocation: frees after the process's last allocation are its
    // teardown (locals and globals released at exit), which ends the run, not its trend.
    trailing_.emplace_back(key(now > made ? now : made, site), uint64_t{0} - bytes);
    if (trailing_.size() >= trailing_compact_at_) [[unlikely]] {
      compact(trailing_);
      trailing_compact_at_ = std::max(trailing_compact_at_, 2 * trailing_.size());
    }
  }

  // Allocations per window.
  uint64_t window_allocations() const { return uint64_t{1} << shift_; }
  // The windows' samples: window w is the sampler's boundary w + 1, every site's live bytes at its
  // end. sites: one more than the highest site index.
  SiteSampler samples(size_t sites) const;

 private:
  static constexpr uint64_t kNoWindow = UINT64_MAX;
  static constexpr size_t kOpenSlots = 4;  // a power of two
  struct Open {
    uint64_t window = kNoWindow;
    uint64_t bytes = 0;  // added in it so far (wrapping)
  };
  using Entry = std::pair<uint64_t, uint64_t>;  // (key(window, site), bytes added)
  static uint64_t key(uint64_t window, uint32_t site) { return window << 32 | site; }

  void add(uint64_t window, uint32_t site, uint64_t delta) {
    const size_t slot = size_t{site} * kOpenSlots + (window & (kOpenSlots - 1));
    if (slot >= open_.size()) [[unlikely]]
      open_.resize(std::max<size_t>((size_t{site} + 1) * kOpenSlots, 2 * open_.size()));
    Open& o = open_[slot];
    if (o.window != window) [[unlikely]]
      reopen(o, window, site);
    o.bytes += delta;
    if (window > last_window_) last_window_ = window;
  }
  uint64_t window_of(Tag tag) const {
    const uint64_t made_shift = tag >> 8;
    return (uint64_t{tag} & 0xff) >> (shift_ - made_shift);
  }
  void settle_trailing();  // the frees held back happened before an allocation: into their windows
  void switch_thread(uint64_t thread_id);
  void reopen(Open& o, uint64_t window, uint32_t site);  // files o's sum, opens window
  void merge();                                          // N doubles: windows 2w, 2w + 1 become w
  static void compact(std::vector<Entry>& log);          // sorted, one entry per key, no zeros

  struct IdentityHash {  // FlatMap::hash mixes the bits itself
    size_t operator()(uint64_t v) const noexcept { return static_cast<size_t>(v); }
  };
  std::vector<Entry> trailing_;  // frees since the last allocation, by (window, site)
  size_t trailing_compact_at_ = 4096;
  FlatMap<uint64_t, uint32_t, IdentityHash> thread_index_;  // thread -> its place in counts_
  static constexpr int kRecentBits = 6;
  struct Recent {
    uint64_t thread = UINT64_MAX;  // none: no thread id is all ones
    uint32_t index = 0;
  };
  std::array<Recent, size_t{1} << kRecentBits> recent_{};  // a direct-mapped cache of thread_index_
  std::vector<uint64_t> counts_ = {0};                     // each thread's allocations so far
  uint64_t thread_ = 0;                                    // the current thread, counts_[current_]
  size_t current_ = 0;
  std::vector<Open> open_;  // kOpenSlots by site: [site * kOpenSlots + window % kOpenSlots]
  std::vector<Entry> log_;  // closed windows' sums, compacted when it reaches compact_at_
  size_t compact_at_ = size_t{1} << 16;
  uint64_t shift_ = 0;  // N = 2^shift_
  uint64_t last_window_ = 0;
};

}  // namespace gpumemshim::analyzer

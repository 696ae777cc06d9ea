// What a flush mark's time may promise. A thread reads the clock for a record, then encodes it and
// appends it to its ring; a thread preempted in between (a loaded machine, 8 threads on 2 cores)
// buffers its record after one or more flushes were cut later than its time. A mark that is just
// the flusher's clock would then be followed by an older record, and a reader that trusts the marks
// would replay out of order. So each thread publishes, in one word, that it is making a record and
// the time it read; the flusher's mark is the earliest of its cut and every such time, which makes
// the rule exact: every record written after a mark was made at or after the mark's time.
//
// The word, in the order the thread sets it:
//   kIdle -> kReadingClock (a full fence) -> time + 1 -> (record in the ring) -> kIdle.
// The flusher reads its cut, then every word, then takes the rings:
// - idle: whatever the thread makes next reads the clock after the flusher did (the fence on both
//   sides), and anything it made before is in its ring, where the take finds it;
// - a time: the record may come after the mark, so the mark is at most that time;
// - kReadingClock: the thread's time is unknown but not older than the moment it set the word, and
//   the flusher's previous mark was computed either before that moment or from this same word
//   (a time, or again kReadingClock): the previous mark is a safe bound.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>

namespace gpumemshim::shim {

class InFlightClock {
 public:
  // The recording thread, for a timed record: reads clock() and publishes it until end().
  template <typename Clock>
  uint64_t begin(Clock&& clock) {
    word_.store(kReadingClock, std::memory_order_seq_cst);  // before the clock read: a full fence
    const uint64_t time = clock();
    word_.store(time + 1, std::memory_order_release);
    return time;
  }
  // The recording thread, once the record is in its ring (or dropped).
  void end() { word_.store(kIdle, std::memory_order_release); }

  // The flusher, after reading its cut: lowers `mark` to what this thread may still buffer.
  // previous_mark: the flusher's previous result (0 before its first).
  uint64_t bound(uint64_t mark, uint64_t previous_mark) const {
    const uint64_t word = word_.load(std::memory_order_seq_cst);
    if (word == kIdle) return mark;
    if (word == kReadingClock) return std::min(mark, previous_mark);
    return std::min(mark, word - 1);
  }

  // The flusher, between reading its cut and reading the words: a full fence (an atomic
  // read-modify-write, which ThreadSanitizer models, where it does not model atomic_thread_fence).
  static void fence_after_cut() {
    static std::atomic<uint64_t> fence{0};
    fence.fetch_add(0, std::memory_order_seq_cst);
  }

  // For a state whose thread is gone (fork, exit): it will not finish its record.
  void reset() { word_.store(kIdle, std::memory_order_relaxed); }

 private:
  static constexpr uint64_t kIdle = 0;
  static constexpr uint64_t kReadingClock = UINT64_MAX;
  std::atomic<uint64_t> word_{kIdle};
};

}  // namespace gpumemshim::shim

// A test-and-set lock for the shim's slow paths (ring drains, block writes, the ordered flush);
// never taken on a hook's per-event path.
#pragma once
#include <sched.h>
#include <time.h>

#include <atomic>

namespace gpumemshim::shim {

class SpinLock {
 public:
  // Yields a while, then sleeps 100 us between tries: a holder may be in a write to a slow disk
  // for seconds, and a waiter that only yields keeps a core busy for as long.
  void lock() {
    for (int i = 0; busy_.test_and_set(std::memory_order_acquire); ++i) {
      if (i < kYieldsBeforeSleep) {
        sched_yield();
      } else {
        timespec pause{0, 100'000};
        nanosleep(&pause, nullptr);
      }
    }
  }
  // Gives up after about 100 ms of yields: the paths that may run in a signal handler (_exit)
  // must not wait forever on a lock that the interrupted code of their own thread holds.
  bool lock_bounded() {
    for (int i = 0; i < kBoundedSpins; ++i) {
      if (!busy_.test_and_set(std::memory_order_acquire)) return true;
      sched_yield();
    }
    return false;
  }
  bool lock(bool bounded) { return bounded ? lock_bounded() : (lock(), true); }
  // Never waits: a recording thread that finds the flusher's lock taken has nothing to do.
  bool try_lock() { return !busy_.test_and_set(std::memory_order_acquire); }
  void unlock() { busy_.clear(std::memory_order_release); }
  // Whether someone holds it now (already stale when read: a hint for waiting, never for safety).
  bool held() const { return busy_.test(std::memory_order_relaxed); }
  // In a forked child: a holder in another thread of the parent never releases it.
  void reset() { busy_.clear(); }

 private:
  static constexpr int kBoundedSpins = 20000;
  static constexpr int kYieldsBeforeSleep = 200;
  std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
};

}  // namespace gpumemshim::shim

// A test-and-set lock for the shim's slow paths (ring drains, block writes, the ordered flush);
// never taken on a hook's per-event path.
#pragma once
#include <sched.h>

#include <atomic>

namespace gpumemshim::shim {

class SpinLock {
 public:
  void lock() {
    while (busy_.test_and_set(std::memory_order_acquire)) sched_yield();
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
  // In a forked child: a holder in another thread of the parent never releases it.
  void reset() { busy_.clear(); }

 private:
  static constexpr int kBoundedSpins = 20000;
  std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
};

}  // namespace gpumemshim::shim

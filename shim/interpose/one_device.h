// Whether the process sees exactly one device: then every allocation is on device 0 and the hooks
// need not ask CUDA for the current device at each one.
#pragma once
#include <atomic>

namespace gpumemshim::shim {

class OneDevice {
 public:
  // count(): the devices CUDA reports (0 when it cannot say), asked once, after a call that reached
  // CUDA; the answer never changes in a process. An unknown count answers false: ask each time.
  template <typename Count>
  bool holds(Count&& count) {
    int n = count_.load(std::memory_order_relaxed);
    if (n < 0) [[unlikely]] {
      n = count();
      count_.store(n, std::memory_order_relaxed);
    }
    return n == 1;
  }

 private:
  std::atomic<int> count_{-1};  // -1: not asked yet
};

}  // namespace gpumemshim::shim

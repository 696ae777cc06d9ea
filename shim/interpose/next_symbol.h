// Finds the real implementation of an interposed function: the next definition after the shim in
// the lookup order.
#pragma once
#include <atomic>

namespace gpumemshim::shim {

void* next_symbol(const char* name);

// Resolves once, lazily, and caches the pointer (a benign race: every thread finds the same one).
template <typename Fn>
class RealFunction {
 public:
  explicit constexpr RealFunction(const char* name) : name_(name) {}
  // Takes `fn` as the real function unless another one is already known. True when the slot now
  // holds `fn` (a function reached through dlsym on a privately loaded library).
  bool adopt(void* fn) {
    void* expected = nullptr;
    return ptr_.compare_exchange_strong(expected, fn) || expected == fn;
  }
  Fn get() {
    void* p = ptr_.load(std::memory_order_relaxed);
    if (!p) [[unlikely]] {
      p = next_symbol(name_);
      ptr_.store(p, std::memory_order_relaxed);
    }
    return reinterpret_cast<Fn>(p);
  }

 private:
  const char* name_;
  std::atomic<void*> ptr_{nullptr};
};

}  // namespace gpumemshim::shim

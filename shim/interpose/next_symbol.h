// The shim's one way to find real symbols. Every lookup goes to the dynamic loader's own dlsym
// (found with dlvsym, never through the shim's dlsym override), with the shim as the caller, so
// RTLD_NEXT means "the next definition after the shim".
#pragma once
#include <atomic>

// Sanitizer runtimes call dlsym while they initialise, before any instrumented code may run: the
// dlsym path is never instrumented.
#define GPUMEMSHIM_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))

namespace gpumemshim::shim {

// The real dlsym(handle, name); null when the loader's dlsym itself could not be found. Call it
// only from the shim's own code: RTLD_NEXT and RTLD_DEFAULT are relative to the calling object.
void* real_symbol(void* handle, const char* name);

// The real implementation of an interposed function: the next definition after the shim in the
// lookup order (logged at debug level when there is none).
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

// Re-entrancy guard: a runtime call that reaches the driver, or CUDA called from inside our own
// recording, is recorded once, at the outermost hook.
#pragma once

namespace gpumemshim::shim {

inline __attribute__((tls_model("initial-exec"))) thread_local int t_hook_depth = 0;

class HookScope {
 public:
  HookScope() : outermost_(t_hook_depth++ == 0) {}
  ~HookScope() { --t_hook_depth; }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
  bool outermost() const { return outermost_; }

 private:
  bool outermost_;
};

}  // namespace gpumemshim::shim

#include "native_stack.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

namespace gpumemshim::shim {

void init_native_unwinder() {
  // The per-thread cache makes repeated unwinds through the same code a table lookup per frame.
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
}

uint32_t capture_native_stack(uint64_t* frames, uint32_t max_frames) {
  int n = unw_backtrace(reinterpret_cast<void**>(frames), static_cast<int>(max_frames));
  return n > 0 ? static_cast<uint32_t>(n) : 0;
}

}  // namespace gpumemshim::shim

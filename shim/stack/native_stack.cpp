#include "native_stack.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

namespace gpumemshim::shim {

void init_native_unwinder() {
  // The per-thread cache makes repeated unwinds through the same code a table lookup per frame.
  // Under ThreadSanitizer its thread-exit destructor runs after TSan has torn the thread down and
  // crashes in TSan's mutex interceptor, so sanitizer builds use the global cache.
#if defined(__SANITIZE_THREAD__)
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_GLOBAL);
#else
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
#endif
}

uint32_t capture_native_stack(uint64_t* frames, uint32_t max_frames) {
#if defined(__SANITIZE_THREAD__)
  // unw_backtrace's fast path keeps a per-thread trace cache whose thread-exit destructor crashes
  // under TSan (see above): step frame by frame instead.
  unw_context_t context;
  unw_cursor_t cursor;
  if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0) return 0;
  uint32_t n = 0;
  do {
    unw_word_t ip = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
    frames[n++] = ip;
  } while (n < max_frames && unw_step(&cursor) > 0);
  return n;
#else
  int n = unw_backtrace(reinterpret_cast<void**>(frames), static_cast<int>(max_frames));
  return n > 0 ? static_cast<uint32_t>(n) : 0;
#endif
}

}  // namespace gpumemshim::shim

#pragma once
#include <atomic>
#include <cstdint>

#include "../config.h"
#include "../stack/stack_interner.h"
#include "ring.h"

namespace gpumemshim::shim {

// Everything one recording thread owns. mmap'ed on the thread's first event and recycled (never
// unmapped) when the thread exits, so the flusher can never touch freed memory.
struct ThreadState {
  Ring ring;
  std::atomic<bool> dead{false};  // owner exited; a new thread may claim this state
  bool registered = false;        // false: no slot was free, drain after every record
  uint64_t thread_id = 0;
  StackInterner stacks;
  uint64_t frames[kMaxDepth];
  uint8_t scratch[8192];
};

}  // namespace gpumemshim::shim

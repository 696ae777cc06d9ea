#pragma once
#include <atomic>
#include <cstdint>

#include "../config.h"
#include "../stack/python_stack.h"
#include "../stack/stack_interner.h"
#include "in_flight.h"
#include "ring.h"

namespace gpumemshim::shim {

// Everything one recording thread owns. mmap'ed on the thread's first event and recycled (never
// unmapped) when the thread exits, so the flusher can never touch freed memory.
struct ThreadState {
  Ring ring;
  std::atomic<bool> dead{false};  // owner exited; a new thread may claim this state
  InFlightClock in_flight;        // the time of the record being made, for the flusher's mark
  bool registered = false;        // false: no slot was free, drain after every record
  bool flush_overdue = false;     // its last record's time was past the flush's due time
  uint64_t thread_id = 0;
  StackInterner stacks;
  StackInterner py_codes;  // Python code ids whose PyCode record this thread wrote
  uint64_t frames[kMaxDepth];
  format::PyFrameRef py_frames[kMaxPythonFrames];
  uintptr_t py_code_objects[kMaxPythonFrames];
  uint8_t scratch[64 * 1024];  // one encoded record (a PyCode record carries a line table)
};

}  // namespace gpumemshim::shim

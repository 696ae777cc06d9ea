// _exit, _Exit and quick_exit end the process without exit's destructors, so the shim's would never
// write the last events and the End block: they are written here first (Python's os._exit calls
// _exit). quick_exit is interposed on its own: glibc calls its internal _exit, not the PLT's.
// In a process that does not own the trace (a vfork child, a fork child that never recorded)
// these only call the real function.
#include <cstdlib>

#include "../record/recorder.h"
#include "next_symbol.h"

#define GPUMEMSHIM_EXPORT extern "C" __attribute__((visibility("default")))

using namespace gpumemshim::shim;

namespace {
RealFunction<void (*)(int)> real__exit("_exit");
RealFunction<void (*)(int)> real__Exit("_Exit");
RealFunction<void (*)(int)> real_quick_exit("quick_exit");
}  // namespace

GPUMEMSHIM_EXPORT [[noreturn]] void _exit(int status) {
  end_trace_before_exit();
  real__exit.get()(status);
  __builtin_unreachable();
}

GPUMEMSHIM_EXPORT [[noreturn]] void _Exit(int status) {
  end_trace_before_exit();
  real__Exit.get()(status);
  __builtin_unreachable();
}

GPUMEMSHIM_EXPORT [[noreturn]] void quick_exit(int status) noexcept {
  end_trace_before_exit();
  real_quick_exit.get()(status);
  __builtin_unreachable();
}

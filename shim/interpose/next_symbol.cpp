#include "next_symbol.h"

#include <dlfcn.h>

#include "../log.h"

// The loader's dlsym, shared with the dlsym override's trampoline (resolvers.cpp), which jumps
// straight to it for RTLD_NEXT once it is known.
extern "C" {
__attribute__((visibility("hidden"))) void* gpumemshim_real_dlsym_ptr = nullptr;
}

namespace gpumemshim::shim {
namespace {

using DlsymFn = void* (*)(void*, const char*);

// GLIBC_2.34 first (where libdl moved into libc), then the older GLIBC_2.2.5 version.
GPUMEMSHIM_NO_SANITIZE DlsymFn real_dlsym() {
  void* p = __atomic_load_n(&gpumemshim_real_dlsym_ptr, __ATOMIC_ACQUIRE);
  if (!p) {
    p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    __atomic_store_n(&gpumemshim_real_dlsym_ptr, p, __ATOMIC_RELEASE);
  }
  return reinterpret_cast<DlsymFn>(p);
}

// Ahead of the shim's other constructors, so that the trampoline's RTLD_NEXT path is ready.
__attribute__((constructor(101))) void resolve_real_dlsym_early() { real_dlsym(); }

}  // namespace

GPUMEMSHIM_NO_SANITIZE void* real_symbol(void* handle, const char* name) {
  DlsymFn dl = real_dlsym();
  return dl ? dl(handle, name) : nullptr;
}

void* next_symbol(const char* name) {
  void* p = real_symbol(RTLD_NEXT, name);
  if (!p) log_debug("no definition of %s after the shim", name);
  return p;
}

}  // namespace gpumemshim::shim

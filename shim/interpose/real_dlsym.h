// The dynamic loader's own dlsym, which the shim's dlsym override forwards to.
#pragma once

namespace gpumemshim::shim {

using DlsymFn = void* (*)(void*, const char*);

// Found with dlvsym (never through our override), GLIBC_2.34 first, then GLIBC_2.2.5.
DlsymFn real_dlsym();

// For a runtime memory function found by dlsym in a library the shim cannot reach by symbol
// binding (e.g. loaded RTLD_LOCAL by ctypes): the shim's hook, which then forwards to `real_fn`.
// Returns `real_fn` itself for other names, or when another runtime is already the one hooked.
void* wrap_runtime_function(const char* name, void* real_fn);

}  // namespace gpumemshim::shim

// The runtime memory functions the shim records, as seen by the resolvers: a function found by
// dlsym in a library the shim cannot reach by symbol binding (e.g. loaded RTLD_LOCAL by ctypes).
#pragma once

namespace gpumemshim::shim {

// The shim's hook for `name`, which then forwards to `real_fn`. Returns `real_fn` itself for
// other names, or when another runtime is already the one hooked.
void* wrap_runtime_function(const char* name, void* real_fn);

}  // namespace gpumemshim::shim

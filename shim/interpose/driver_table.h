// The driver functions the shim records, by exact exported name, with the shim's wrapper for each
// and the slot holding the real function. The resolvers (dlsym, cuGetProcAddress,
// cudaGetDriverEntryPoint) hand out a wrapper only when they can tell exactly which versioned
// function the real resolver returned, so a caller never gets a function of another signature.
#pragma once
#include <atomic>

namespace gpumemshim::shim {

struct DriverEntry {
  const char* name;           // exported name, e.g. "cuMemAlloc_v2"
  const char* base;           // name asked of cuGetProcAddress, e.g. "cuMemAlloc"
  int min_version;            // lowest cudaVersion for which base resolves to name
  bool per_thread_stream;     // the _ptsz variant of base
  void* wrapper;              // the shim's function
  std::atomic<void*>* real;   // the driver's function, once known
};

// Returns the wrapper for a function the real resolver returned, or `real_fn` itself when the
// function is not recorded or cannot be identified. `base_name` is what the caller asked for
// (for dlsym: the exact name), `version` and `flags` as passed to cuGetProcAddress.
void* wrap_driver_function(const char* asked_name, void* real_fn, int version,
                           unsigned long long flags);

// Resolves a wrapper's slot on first use when the wrapper was reached by symbol binding rather
// than through a resolver.
void* resolve_driver_function(const char* name, std::atomic<void*>& slot);

// The driver function behind a wrapper's slot (inline: every wrapped call reads it).
inline void* real_driver_function(const char* name, std::atomic<void*>& slot) {
  void* p = slot.load(std::memory_order_acquire);
  return p ? p : resolve_driver_function(name, slot);
}

}  // namespace gpumemshim::shim

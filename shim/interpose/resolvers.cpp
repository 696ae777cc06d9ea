// The ways a program finds driver functions without symbol binding: dlsym on libcuda (how every
// cudart, static or shared, finds cuGetProcAddress), cuGetProcAddress itself, and the runtime's
// cudaGetDriverEntryPoint[ByVersion] (PyTorch's expandable segments). Each asks the real resolver
// first and, only on success, swaps in the shim's wrapper for the memory functions it records.
#include <dlfcn.h>

#include <climits>
#include <cstring>

#include "../log.h"
#include "cuda_abi.h"
#include "driver_table.h"
#include "next_symbol.h"
#include "runtime_table.h"

#define GPUMEMSHIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace gpumemshim::shim {

extern DriverEntry g_driver_entries[];
extern const size_t g_driver_entry_count;

}  // namespace gpumemshim::shim

using namespace gpumemshim::shim;

// gpumemshim_real_dlsym_ptr, the loader's dlsym once known, is defined in next_symbol.cpp.
extern "C" {
__attribute__((visibility("hidden"))) void* gpumemshim_dlsym_impl(void* handle, const char* name);
}

// dlsym(RTLD_NEXT, ...) means "after the caller's object": the loader finds the caller from its
// return address, so that case jumps straight into the real dlsym with the caller's frame intact.
// Every other handle goes through gpumemshim_dlsym_impl.
asm(R"(
    .text
    .globl dlsym
    .type dlsym, @function
dlsym:
    cmpq $-1, %rdi
    jne 1f
    movq gpumemshim_real_dlsym_ptr(%rip), %rax
    testq %rax, %rax
    je 1f
    jmp *%rax
1:
    jmp gpumemshim_dlsym_impl
    .size dlsym, .-dlsym
)");

namespace gpumemshim::shim {
namespace {

// Only cuMem* and cuGetProcAddress* names can be recorded functions: a cheap first filter.
bool is_driver_name(const char* name) {
  return name && (std::strncmp(name, "cuMem", 5) == 0 ||
                  std::strncmp(name, "cuGetProcAddress", 16) == 0);
}

DriverEntry* entry_by_wrapper(void* fn) {
  for (size_t i = 0; i < g_driver_entry_count; ++i)
    if (g_driver_entries[i].wrapper == fn) return &g_driver_entries[i];
  return nullptr;
}

DriverEntry* entry_by_name(const char* name) {
  for (size_t i = 0; i < g_driver_entry_count; ++i)
    if (std::strcmp(g_driver_entries[i].name, name) == 0) return &g_driver_entries[i];
  return nullptr;
}

bool has_ptsz_variant(const char* base) {
  for (size_t i = 0; i < g_driver_entry_count; ++i)
    if (g_driver_entries[i].per_thread_stream && std::strcmp(g_driver_entries[i].base, base) == 0)
      return true;
  return false;
}

// When the returned function has no exported name of its own: the newest variant of the base name
// that the caller's version allows, the _ptsz one when the caller asked for per-thread streams.
DriverEntry* entry_by_base(const char* base, int version, unsigned long long flags) {
  bool want_ptsz = (flags & kCuGetProcAddressPerThreadDefaultStream) && has_ptsz_variant(base);
  DriverEntry* best = nullptr;
  for (size_t i = 0; i < g_driver_entry_count; ++i) {
    DriverEntry& e = g_driver_entries[i];
    if (std::strcmp(e.base, base) != 0 || e.min_version > version) continue;
    if (e.per_thread_stream != want_ptsz) continue;
    if (!best || e.min_version > best->min_version) best = &e;
  }
  return best;
}

}  // namespace


void* wrap_driver_function(const char* asked, void* real_fn, int version,
                           unsigned long long flags) {
  if (!real_fn || !is_driver_name(asked)) return real_fn;
  if (entry_by_wrapper(real_fn)) return real_fn;  // already ours (a resolver called another)
  DriverEntry* entry = nullptr;
  Dl_info info{};
  if (dladdr(real_fn, &info) && info.dli_saddr == real_fn && info.dli_sname)
    entry = entry_by_name(info.dli_sname);
  if (!entry) entry = version < 0 ? entry_by_name(asked) : entry_by_base(asked, version, flags);
  if (!entry) return real_fn;
  void* expected = nullptr;
  if (!entry->real->compare_exchange_strong(expected, real_fn) && expected != real_fn) {
    // A second driver? Keep the first; hand this caller the real function untouched.
    log_debug("%s resolved to two different functions; not wrapping the second", entry->name);
    return real_fn;
  }
  return entry->wrapper;
}

void* resolve_driver_function(const char* name, std::atomic<void*>& slot) {
  void* p = real_symbol(RTLD_NEXT, name);  // programs linked with -lcuda
  if (!p) {  // libcuda opened privately (static cudart): ask it directly
    if (void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
      p = real_symbol(h, name);
      dlclose(h);
    }
  }
  if (p) {
    void* expected = nullptr;
    if (!slot.compare_exchange_strong(expected, p)) p = expected;
  }
  return p;
}

}  // namespace gpumemshim::shim

extern "C" __attribute__((visibility("hidden"))) GPUMEMSHIM_NO_SANITIZE void* gpumemshim_dlsym_impl(
    void* handle, const char* name) {
  void* p = real_symbol(handle, name);
  if (!p || !name || name[0] != 'c' || name[1] != 'u') return p;
  if (is_driver_name(name)) return wrap_driver_function(name, p, -1, 0);
  if (name[2] == 'd' && name[3] == 'a') return wrap_runtime_function(name, p);
  return p;
}

// --- cuGetProcAddress: exported wrappers, also handed out for "cuGetProcAddress" itself --------

namespace gpumemshim::shim {
std::atomic<void*> slot_cuGetProcAddress{nullptr};
std::atomic<void*> slot_cuGetProcAddress_v2{nullptr};
}  // namespace gpumemshim::shim

GPUMEMSHIM_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                               cuuint64_t flags,
                                               CUdriverProcAddressQueryResult* status) {
  auto real = reinterpret_cast<CUresult (*)(const char*, void**, int, cuuint64_t,
                                            CUdriverProcAddressQueryResult*)>(
      real_driver_function("cuGetProcAddress_v2", slot_cuGetProcAddress_v2));
  if (!real) return kCuErrorNotInitialized;
  CUresult rc = real(symbol, pfn, version, flags, status);
  if (rc == kCuSuccess && pfn && *pfn) *pfn = wrap_driver_function(symbol, *pfn, version, flags);
  return rc;
}

GPUMEMSHIM_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version,
                                            cuuint64_t flags) {
  auto real = reinterpret_cast<CUresult (*)(const char*, void**, int, cuuint64_t)>(
      real_driver_function("cuGetProcAddress", slot_cuGetProcAddress));
  if (!real) return kCuErrorNotInitialized;
  CUresult rc = real(symbol, pfn, version, flags);
  if (rc == kCuSuccess && pfn && *pfn) *pfn = wrap_driver_function(symbol, *pfn, version, flags);
  return rc;
}

// --- the runtime's entry-point queries ----------------------------------------------------------

namespace {
RealFunction<cudaError_t (*)(const char*, void**, unsigned long long,
                             cudaDriverEntryPointQueryResult*)>
    real_cudaGetDriverEntryPoint("cudaGetDriverEntryPoint");
RealFunction<cudaError_t (*)(const char*, void**, unsigned, unsigned long long,
                             cudaDriverEntryPointQueryResult*)>
    real_cudaGetDriverEntryPointByVersion("cudaGetDriverEntryPointByVersion");
// cudaGetDriverEntryPoint answers for the runtime's own CUDA version (12.0 or newer).
constexpr int kRuntimeEntryPointVersion = 12000;
}  // namespace

GPUMEMSHIM_EXPORT cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** fn,
                                                      unsigned long long flags,
                                                      cudaDriverEntryPointQueryResult* status) {
  auto real = real_cudaGetDriverEntryPoint.get();
  if (!real) return kCudaErrorInitializationError;
  cudaError_t rc = real(symbol, fn, flags, status);
  if (rc == kCudaSuccess && fn && *fn)
    *fn = wrap_driver_function(symbol, *fn, kRuntimeEntryPointVersion, flags);
  return rc;
}

GPUMEMSHIM_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(
    const char* symbol, void** fn, unsigned version, unsigned long long flags,
    cudaDriverEntryPointQueryResult* status) {
  auto real = real_cudaGetDriverEntryPointByVersion.get();
  if (!real) return kCudaErrorInitializationError;
  cudaError_t rc = real(symbol, fn, version, flags, status);
  if (rc == kCudaSuccess && fn && *fn)
    *fn = wrap_driver_function(symbol, *fn, static_cast<int>(version < INT_MAX ? version : INT_MAX),
                               flags);
  return rc;
}

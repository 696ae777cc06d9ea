// Interposed CUDA runtime API memory functions (programs and libraries that link libcudart.so
// dynamically, e.g. PyTorch's caching allocator). Each hook calls the real function, returns
// exactly what it returned, and records the outcome when it is the outermost hook.
#include <dlfcn.h>

#include <cstdint>
#include <cstring>

#include "../record/recorder.h"
#include "cuda_abi.h"
#include "hook_scope.h"
#include "next_symbol.h"
#include "one_device.h"
#include "runtime_table.h"

#define GPUMEMSHIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace gpumemshim::shim {
namespace {

RealFunction<cudaError_t (*)(int*)> real_cudaGetDevice("cudaGetDevice");
RealFunction<cudaError_t (*)(int*)> real_cudaGetDeviceCount("cudaGetDeviceCount");
OneDevice g_one_device;

int current_device() {
  if (g_one_device.holds([] {
        int count = 0;
        auto fn = real_cudaGetDeviceCount.get();
        return fn && fn(&count) == kCudaSuccess ? count : 0;
      }))
    return 0;
  int device = 0;
  if (auto fn = real_cudaGetDevice.get()) fn(&device);
  return device;
}

uint64_t u64(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// Shared shape of every allocating hook: record success with the address and size, failure with
// the size asked and the error.
[[gnu::noinline]] void record_outcome(cudaError_t rc, Api api, MemoryKind kind, uint64_t stream,
                                      const void* ptr, uint64_t size) {
  if (recording_off()) return;
  if (rc == kCudaSuccess)
    record_alloc(api, kind, current_device(), stream, u64(ptr), size);
  else
    record_alloc_failed(api, kind, current_device(), stream, size, static_cast<uint32_t>(rc));
}

inline void after_alloc(const HookScope& scope, cudaError_t rc, Api api, MemoryKind kind,
                        uint64_t stream, const void* ptr, uint64_t size) {
  if (scope.outermost()) record_outcome(rc, api, kind, stream, ptr, size);
}

// Frees are recorded before the real call: once freed, another thread may get the same address.
template <typename Call>
cudaError_t recorded_free(Api api, MemoryKind kind, uint64_t stream, const void* ptr, Call&& call) {
  HookScope scope;
  bool record = scope.outermost() && ptr && !recording_off();
  const int device = kFreeDeviceUnknown;  // the analyzer takes it from the allocation
  if (record) record_free(api, kind, device, stream, u64(ptr));
  cudaError_t rc = call();
  if (record && rc != kCudaSuccess)
    record_free_failed(api, kind, device, stream, u64(ptr), static_cast<uint32_t>(rc));
  return rc;
}

using format::Api;
using format::MemoryKind;

}  // namespace
}  // namespace gpumemshim::shim

using namespace gpumemshim::shim;

namespace {
RealFunction<cudaError_t (*)(void**, size_t)> real_cudaMalloc("cudaMalloc");
RealFunction<cudaError_t (*)(void*)> real_cudaFree("cudaFree");
RealFunction<cudaError_t (*)(void**, size_t, cudaStream_t)> real_cudaMallocAsync("cudaMallocAsync");
RealFunction<cudaError_t (*)(void*, cudaStream_t)> real_cudaFreeAsync("cudaFreeAsync");
RealFunction<cudaError_t (*)(void**, size_t, cudaMemPool_t, cudaStream_t)>
    real_cudaMallocFromPoolAsync("cudaMallocFromPoolAsync");
RealFunction<cudaError_t (*)(void**, size_t, unsigned)> real_cudaMallocManaged("cudaMallocManaged");
RealFunction<cudaError_t (*)(void**, size_t*, size_t, size_t)> real_cudaMallocPitch("cudaMallocPitch");
RealFunction<cudaError_t (*)(cudaPitchedPtr*, cudaExtent)> real_cudaMalloc3D("cudaMalloc3D");
RealFunction<cudaError_t (*)(void**, size_t)> real_cudaMallocHost("cudaMallocHost");
RealFunction<cudaError_t (*)(void**, size_t, unsigned)> real_cudaHostAlloc("cudaHostAlloc");
RealFunction<cudaError_t (*)(void*)> real_cudaFreeHost("cudaFreeHost");
RealFunction<cudaError_t (*)(size_t*, size_t*)> real_cudaMemGetInfo("cudaMemGetInfo");

uint64_t stream_id(cudaStream_t s) { return reinterpret_cast<uintptr_t>(s); }
}  // namespace

GPUMEMSHIM_EXPORT cudaError_t cudaMalloc(void** ptr, size_t size) {
  auto real = real_cudaMalloc.get();
  if (!real) return kCudaErrorInitializationError;
  HookScope scope;
  cudaError_t rc = real(ptr, size);
  after_alloc(scope, rc, Api::kCudaMalloc, MemoryKind::kDevice, 0, rc == kCudaSuccess ? *ptr : nullptr, size);
  return rc;
}

GPUMEMSHIM_EXPORT cudaError_t cudaFree(void* ptr) {
  auto real = real_cudaFree.get();
  if (!real) return kCudaErrorInitializationError;
  return recorded_free(Api::kCudaFree, MemoryKind::kDevice, 0, ptr, [&] { return real(ptr); });
}

GPUMEMSHIM_EXPORT cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaStream_t stream) {
  auto real = real_cudaMallocAsync.get();
  if (!real) return kCudaErrorInitializationError;
  HookScope scope;
  cudaError_t rc = real(ptr, size, stream);
  after_alloc(scope, rc, Api::kCudaMallocAsync, MemoryKind::kPool, stream_id(stream),
              rc == kCudaSuccess ? *ptr : nullptr, size);
  return rc;
}

GPUMEMSHIM_EXPORT cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  auto real = real_cudaFreeAsync.get();
  if (!real) return kCudaErrorInitializationError;
  return recorded_free(Api::kCudaFreeAsync, MemoryKind::kPool, stream_id(stream), ptr,
                       [&] { return real(ptr, stream); });
}

GPUMEMSHIM_EXPORT cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t pool,
                                                      cudaStream_t stream) {
  auto real = real_cudaMallocFromPoolAsync.get();
  if (!real) return kCudaErrorInitializationError;
  HookScope scope;
  cudaError_t rc = real(ptr, size, pool, stream);
  after_alloc(scope, rc, Api::kCudaMallocFromPoolAsync, MemoryKind::kPool, stream_id(stream),
              rc == kCudaSuccess ? *ptr : nullptr, size);
  return rc;
}

GPUMEMSHIM_EXPORT cudaError_t cudaMallocManaged(void** ptr, size_t size, unsigned flags) {
  auto real = real_cudaMallocManaged.get();
  if (!real) return kCudaErrorInitializationError;
  HookScope scope;
  cudaError_t rc = real(ptr, size, flags);
  after_alloc(scope, rc, Api::kCudaMallocManaged, MemoryKind::kManaged, 0,
              rc == kCudaSuccess ? *ptr : nullptr, size);
  return rc;
}

GPUMEMSHIM_EXPORT cudaError_t cudaMallocPitch(void** ptr, size_t* pitch, size_t width,
                                              size_t height) {
  auto real = real_cudaMallocPitch.get();
  if (!real) return kCudaErrorInitializationError;
  HookScope scope;
  cudaError_t rc = real(ptr, pitch, width, height);
  bool ok = rc == kCudaSuccess;
  // On failure the pitch is unknown: the size asked is width × height.
  after_alloc(scope, rc, Api::kCudaMallocPitch, MemoryKind::kDevice, 0, ok ? *ptr : nullptr,
              ok ? *pitch * height : width * height);
  return rc;
}

GPUMEMSHIM_EXPORT cudaError_t cudaMalloc3D(cudaPitchedPtr* pitched, cudaExtent extent) {
  auto real = real_cudaMalloc3D.get();
  if (!real) return kCudaErrorInitializationError;
  HookScope scope;
  cudaError_t rc = real(pitched, extent);
  bool ok = rc == kCudaSuccess;
  uint64_t rows = static_cast<uint64_t>(extent.height) * extent.depth;
  after_alloc(scope, rc, Api::kCudaMalloc3D, MemoryKind::kDevice, 0, ok ? pitched->ptr : nullptr,
              ok ? pitched->pitch * rows : extent.width * rows);
  return rc;
}

GPUMEMSHIM_EXPORT cudaError_t cudaMallocHost(void** ptr, size_t size) {
  auto real = real_cudaMallocHost.get();
  if (!real) return kCudaErrorInitializationError;
  HookScope scope;
  cudaError_t rc = real(ptr, size);
  after_alloc(scope, rc, Api::kCudaMallocHost, MemoryKind::kPinnedHost, 0,
              rc == kCudaSuccess ? *ptr : nullptr, size);
  return rc;
}

GPUMEMSHIM_EXPORT cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned flags) {
  auto real = real_cudaHostAlloc.get();
  if (!real) return kCudaErrorInitializationError;
  HookScope scope;
  cudaError_t rc = real(ptr, size, flags);
  after_alloc(scope, rc, Api::kCudaHostAlloc, MemoryKind::kPinnedHost, 0,
              rc == kCudaSuccess ? *ptr : nullptr, size);
  return rc;
}

GPUMEMSHIM_EXPORT cudaError_t cudaFreeHost(void* ptr) {
  auto real = real_cudaFreeHost.get();
  if (!real) return kCudaErrorInitializationError;
  return recorded_free(Api::kCudaFreeHost, MemoryKind::kPinnedHost, 0, ptr,
                       [&] { return real(ptr); });
}

GPUMEMSHIM_EXPORT cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  auto real = real_cudaMemGetInfo.get();
  if (!real) return kCudaErrorInitializationError;
  HookScope scope;
  cudaError_t rc = real(free_bytes, total_bytes);
  if (rc == kCudaSuccess && scope.outermost() && !recording_off())
    record_mem_info(current_device(), *free_bytes, *total_bytes);
  return rc;
}

// --- dlsym on a privately loaded cudart (ctypes, RTLD_LOCAL) -------------------------------------

namespace gpumemshim::shim {

namespace {
struct RuntimeEntry {
  const char* name;
  void* wrapper;
  bool (*adopt)(void*);
};

template <auto& real>
bool adopt_into(void* fn) { return real.adopt(fn); }

#define GPUMEMSHIM_RUNTIME_ENTRY(name) \
  {#name, reinterpret_cast<void*>(&::name), &adopt_into<real_##name>}
const RuntimeEntry kRuntimeEntries[] = {
    GPUMEMSHIM_RUNTIME_ENTRY(cudaMalloc),       GPUMEMSHIM_RUNTIME_ENTRY(cudaFree),
    GPUMEMSHIM_RUNTIME_ENTRY(cudaMallocAsync),  GPUMEMSHIM_RUNTIME_ENTRY(cudaFreeAsync),
    GPUMEMSHIM_RUNTIME_ENTRY(cudaMallocFromPoolAsync),
    GPUMEMSHIM_RUNTIME_ENTRY(cudaMallocManaged), GPUMEMSHIM_RUNTIME_ENTRY(cudaMallocPitch),
    GPUMEMSHIM_RUNTIME_ENTRY(cudaMalloc3D),     GPUMEMSHIM_RUNTIME_ENTRY(cudaMallocHost),
    GPUMEMSHIM_RUNTIME_ENTRY(cudaHostAlloc),    GPUMEMSHIM_RUNTIME_ENTRY(cudaFreeHost),
    GPUMEMSHIM_RUNTIME_ENTRY(cudaMemGetInfo),
};
#undef GPUMEMSHIM_RUNTIME_ENTRY

// The device query must come from the same runtime as the functions it tags.
void adopt_get_device_beside(void* fn) {
  Dl_info info{};
  if (!dladdr(fn, &info) || !info.dli_fname) return;
  void* lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return;
  if (void* get_device = real_symbol(lib, "cudaGetDevice")) real_cudaGetDevice.adopt(get_device);
  dlclose(lib);
}
}  // namespace

void* wrap_runtime_function(const char* name, void* real_fn) {
  for (const RuntimeEntry& e : kRuntimeEntries) {
    if (std::strcmp(e.name, name) != 0) continue;
    if (real_fn == e.wrapper) return real_fn;
    if (!e.adopt(real_fn)) return real_fn;  // another runtime is already the one we forward to
    adopt_get_device_beside(real_fn);
    return e.wrapper;
  }
  return real_fn;
}

}  // namespace gpumemshim::shim

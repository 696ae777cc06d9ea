// Interposed CUDA driver API memory functions. They are reached three ways: symbol binding
// (programs linked with -lcuda), dlsym on libcuda, and cuGetProcAddress / cudaGetDriverEntryPoint
// (the static cudart, NCCL, PyTorch's expandable segments) — see resolvers.cpp.
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "../record/recorder.h"
#include "cuda_abi.h"
#include "driver_table.h"
#include "hook_scope.h"
#include "one_device.h"

#define GPUMEMSHIM_EXPORT extern "C" __attribute__((visibility("default")))

using namespace gpumemshim::shim;

namespace {

std::atomic<void*> real_cuCtxGetDevice{nullptr};
std::atomic<void*> real_cuDeviceGetCount{nullptr};
OneDevice g_one_device;

int current_device() {
  if (g_one_device.holds([] {
        int count = 0;
        auto fn = reinterpret_cast<CUresult (*)(int*)>(
            real_driver_function("cuDeviceGetCount", real_cuDeviceGetCount));
        return fn && fn(&count) == kCuSuccess ? count : 0;
      }))
    return 0;
  auto fn = reinterpret_cast<CUresult (*)(CUdevice*)>(
      real_driver_function("cuCtxGetDevice", real_cuCtxGetDevice));
  CUdevice device = 0;
  if (fn && fn(&device) != kCuSuccess) device = 0;
  return device;
}

uint64_t stream_id(CUstream s) { return reinterpret_cast<uintptr_t>(s); }

constexpr int kCurrentDevice = -1;  // ask the driver, only when the event is recorded

[[gnu::noinline]] void record_outcome(CUresult rc, Api api, MemoryKind kind, int device,
                                      uint64_t stream, uint64_t address, uint64_t size) {
  if (recording_off()) return;
  if (device == kCurrentDevice) device = current_device();
  if (rc == kCuSuccess)
    record_alloc(api, kind, device, stream, address, size);
  else
    record_alloc_failed(api, kind, device, stream, size, static_cast<uint32_t>(rc));
}

// Inline: a call made inside another hook (the runtime's cudaMalloc reaching cuMemAlloc) costs
// only this test.
inline void after_alloc(const HookScope& scope, CUresult rc, Api api, MemoryKind kind, int device,
                        uint64_t stream, uint64_t address, uint64_t size) {
  if (scope.outermost()) record_outcome(rc, api, kind, device, stream, address, size);
}

// Frees are recorded before the real call (the address or handle may be reused at once).
template <typename Call>
CUresult recorded_free(Api api, MemoryKind kind, uint64_t stream, uint64_t address, Call&& call) {
  HookScope scope;
  bool record = scope.outermost() && address && !recording_off();
  const int device = kFreeDeviceUnknown;  // the analyzer takes it from the allocation
  if (record) record_free(api, kind, device, stream, address);
  CUresult rc = call();
  if (record && rc != kCuSuccess)
    record_free_failed(api, kind, device, stream, address, static_cast<uint32_t>(rc));
  return rc;
}

template <typename Fn>
Fn real_of(const char* name, std::atomic<void*>& slot) {
  return reinterpret_cast<Fn>(real_driver_function(name, slot));
}

}  // namespace

// One slot per exported wrapper, named after it.
#define GPUMEMSHIM_SLOT(name) std::atomic<void*> slot_##name{nullptr};
#define GPUMEMSHIM_REAL(name, type) auto real = real_of<type>(#name, slot_##name); \
  if (!real) return kCuErrorNotInitialized

GPUMEMSHIM_SLOT(cuMemAlloc_v2)
GPUMEMSHIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t size) {
  GPUMEMSHIM_REAL(cuMemAlloc_v2, CUresult (*)(CUdeviceptr*, size_t));
  HookScope scope;
  CUresult rc = real(ptr, size);
  after_alloc(scope, rc, Api::kCuMemAlloc, MemoryKind::kDevice, kCurrentDevice, 0,
              rc == kCuSuccess ? *ptr : 0, size);
  return rc;
}

GPUMEMSHIM_SLOT(cuMemFree_v2)
GPUMEMSHIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr ptr) {
  GPUMEMSHIM_REAL(cuMemFree_v2, CUresult (*)(CUdeviceptr));
  return recorded_free(Api::kCuMemFree, MemoryKind::kDevice, 0, ptr, [&] { return real(ptr); });
}

GPUMEMSHIM_SLOT(cuMemAllocPitch_v2)
GPUMEMSHIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* ptr, size_t* pitch, size_t width,
                                              size_t height, unsigned element_size) {
  GPUMEMSHIM_REAL(cuMemAllocPitch_v2, CUresult (*)(CUdeviceptr*, size_t*, size_t, size_t, unsigned));
  HookScope scope;
  CUresult rc = real(ptr, pitch, width, height, element_size);
  bool ok = rc == kCuSuccess;
  after_alloc(scope, rc, Api::kCuMemAllocPitch, MemoryKind::kDevice, kCurrentDevice, 0,
              ok ? *ptr : 0, ok ? *pitch * height : width * height);
  return rc;
}

GPUMEMSHIM_SLOT(cuMemAllocManaged)
GPUMEMSHIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* ptr, size_t size, unsigned flags) {
  GPUMEMSHIM_REAL(cuMemAllocManaged, CUresult (*)(CUdeviceptr*, size_t, unsigned));
  HookScope scope;
  CUresult rc = real(ptr, size, flags);
  after_alloc(scope, rc, Api::kCuMemAllocManaged, MemoryKind::kManaged, kCurrentDevice, 0,
              rc == kCuSuccess ? *ptr : 0, size);
  return rc;
}

// Stream-ordered allocation: the plain and the per-thread-default-stream variants.
#define GPUMEMSHIM_ALLOC_ASYNC(name)                                                           \
  GPUMEMSHIM_SLOT(name)                                                                        \
  GPUMEMSHIM_EXPORT CUresult name(CUdeviceptr* ptr, size_t size, CUstream stream) {            \
    GPUMEMSHIM_REAL(name, CUresult (*)(CUdeviceptr*, size_t, CUstream));                       \
    HookScope scope;                                                                           \
    CUresult rc = real(ptr, size, stream);                                                     \
    after_alloc(scope, rc, Api::kCuMemAllocAsync, MemoryKind::kPool, kCurrentDevice,          \
                stream_id(stream), rc == kCuSuccess ? *ptr : 0, size);                         \
    return rc;                                                                                 \
  }
GPUMEMSHIM_ALLOC_ASYNC(cuMemAllocAsync)
GPUMEMSHIM_ALLOC_ASYNC(cuMemAllocAsync_ptsz)

#define GPUMEMSHIM_FREE_ASYNC(name)                                                            \
  GPUMEMSHIM_SLOT(name)                                                                        \
  GPUMEMSHIM_EXPORT CUresult name(CUdeviceptr ptr, CUstream stream) {                          \
    GPUMEMSHIM_REAL(name, CUresult (*)(CUdeviceptr, CUstream));                                \
    return recorded_free(Api::kCuMemFreeAsync, MemoryKind::kPool, stream_id(stream), ptr,      \
                         [&] { return real(ptr, stream); });                                   \
  }
GPUMEMSHIM_FREE_ASYNC(cuMemFreeAsync)
GPUMEMSHIM_FREE_ASYNC(cuMemFreeAsync_ptsz)

#define GPUMEMSHIM_ALLOC_FROM_POOL(name)                                                       \
  GPUMEMSHIM_SLOT(name)                                                                        \
  GPUMEMSHIM_EXPORT CUresult name(CUdeviceptr* ptr, size_t size, CUmemoryPool pool,            \
                                  CUstream stream) {                                           \
    GPUMEMSHIM_REAL(name, CUresult (*)(CUdeviceptr*, size_t, CUmemoryPool, CUstream));         \
    HookScope scope;                                                                           \
    CUresult rc = real(ptr, size, pool, stream);                                               \
    after_alloc(scope, rc, Api::kCuMemAllocFromPoolAsync, MemoryKind::kPool, kCurrentDevice,  \
                stream_id(stream), rc == kCuSuccess ? *ptr : 0, size);                         \
    return rc;                                                                                 \
  }
GPUMEMSHIM_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync)
GPUMEMSHIM_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync_ptsz)

// VMM: physical memory (what leaks), mappings and address reservations (shown, not counted).
GPUMEMSHIM_SLOT(cuMemCreate)
GPUMEMSHIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                       const CUmemAllocationPropPrefix* prop,
                                       unsigned long long flags) {
  GPUMEMSHIM_REAL(cuMemCreate, CUresult (*)(CUmemGenericAllocationHandle*, size_t,
                                            const CUmemAllocationPropPrefix*, unsigned long long));
  HookScope scope;
  CUresult rc = real(handle, size, prop, flags);
  after_alloc(scope, rc, Api::kCuMemCreate, MemoryKind::kPhysical, prop ? prop->location.id : 0,
              0, rc == kCuSuccess ? *handle : 0, size);
  return rc;
}

GPUMEMSHIM_SLOT(cuMemRelease)
GPUMEMSHIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  GPUMEMSHIM_REAL(cuMemRelease, CUresult (*)(CUmemGenericAllocationHandle));
  return recorded_free(Api::kCuMemRelease, MemoryKind::kPhysical, 0, handle,
                       [&] { return real(handle); });
}

GPUMEMSHIM_SLOT(cuMemMap)
GPUMEMSHIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                    CUmemGenericAllocationHandle handle, unsigned long long flags) {
  GPUMEMSHIM_REAL(cuMemMap, CUresult (*)(CUdeviceptr, size_t, size_t,
                                         CUmemGenericAllocationHandle, unsigned long long));
  HookScope scope;
  CUresult rc = real(ptr, size, offset, handle, flags);
  // The stream field names the handle: physical memory lives until its last mapping goes, and the
  // analyzer can tie a mapping to its handle only through this record.
  after_alloc(scope, rc, Api::kCuMemMap, MemoryKind::kMapping, kCurrentDevice, handle, ptr, size);
  return rc;
}

GPUMEMSHIM_SLOT(cuMemUnmap)
GPUMEMSHIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  GPUMEMSHIM_REAL(cuMemUnmap, CUresult (*)(CUdeviceptr, size_t));
  // The stream field holds the range's size: one cuMemUnmap can unmap several adjacent mappings.
  return recorded_free(Api::kCuMemUnmap, MemoryKind::kMapping, size, ptr,
                       [&] { return real(ptr, size); });
}

GPUMEMSHIM_SLOT(cuMemAddressReserve)
GPUMEMSHIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                               CUdeviceptr addr, unsigned long long flags) {
  GPUMEMSHIM_REAL(cuMemAddressReserve, CUresult (*)(CUdeviceptr*, size_t, size_t, CUdeviceptr,
                                                    unsigned long long));
  HookScope scope;
  CUresult rc = real(ptr, size, alignment, addr, flags);
  after_alloc(scope, rc, Api::kCuMemAddressReserve, MemoryKind::kReservation, kCurrentDevice, 0,
              rc == kCuSuccess ? *ptr : 0, size);
  return rc;
}

GPUMEMSHIM_SLOT(cuMemAddressFree)
GPUMEMSHIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  GPUMEMSHIM_REAL(cuMemAddressFree, CUresult (*)(CUdeviceptr, size_t));
  return recorded_free(Api::kCuMemAddressFree, MemoryKind::kReservation, 0, ptr,
                       [&] { return real(ptr, size); });
}

GPUMEMSHIM_SLOT(cuMemHostAlloc)
GPUMEMSHIM_EXPORT CUresult cuMemHostAlloc(void** ptr, size_t size, unsigned flags) {
  GPUMEMSHIM_REAL(cuMemHostAlloc, CUresult (*)(void**, size_t, unsigned));
  HookScope scope;
  CUresult rc = real(ptr, size, flags);
  after_alloc(scope, rc, Api::kCuMemHostAlloc, MemoryKind::kPinnedHost, kCurrentDevice, 0,
              rc == kCuSuccess ? reinterpret_cast<uintptr_t>(*ptr) : 0, size);
  return rc;
}

GPUMEMSHIM_SLOT(cuMemAllocHost_v2)
GPUMEMSHIM_EXPORT CUresult cuMemAllocHost_v2(void** ptr, size_t size) {
  GPUMEMSHIM_REAL(cuMemAllocHost_v2, CUresult (*)(void**, size_t));
  HookScope scope;
  CUresult rc = real(ptr, size);
  after_alloc(scope, rc, Api::kCuMemAllocHost, MemoryKind::kPinnedHost, kCurrentDevice, 0,
              rc == kCuSuccess ? reinterpret_cast<uintptr_t>(*ptr) : 0, size);
  return rc;
}

GPUMEMSHIM_SLOT(cuMemFreeHost)
GPUMEMSHIM_EXPORT CUresult cuMemFreeHost(void* ptr) {
  GPUMEMSHIM_REAL(cuMemFreeHost, CUresult (*)(void*));
  return recorded_free(Api::kCuMemFreeHost, MemoryKind::kPinnedHost, 0,
                       reinterpret_cast<uintptr_t>(ptr), [&] { return real(ptr); });
}

GPUMEMSHIM_SLOT(cuMemGetInfo_v2)
GPUMEMSHIM_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  GPUMEMSHIM_REAL(cuMemGetInfo_v2, CUresult (*)(size_t*, size_t*));
  HookScope scope;
  CUresult rc = real(free_bytes, total_bytes);
  if (rc == kCuSuccess && scope.outermost() && !recording_off())
    record_mem_info(current_device(), *free_bytes, *total_bytes);
  return rc;
}

namespace gpumemshim::shim {

// Defined with the resolvers; listed here so every wrapper and its slot sit in one table.
extern std::atomic<void*> slot_cuGetProcAddress;
extern std::atomic<void*> slot_cuGetProcAddress_v2;
extern "C" CUresult cuGetProcAddress(const char*, void**, int, cuuint64_t);
extern "C" CUresult cuGetProcAddress_v2(const char*, void**, int, cuuint64_t,
                                        CUdriverProcAddressQueryResult*);

#define GPUMEMSHIM_ENTRY(name, base, version, ptsz) \
  {#name, base, version, ptsz, reinterpret_cast<void*>(&::name), &::slot_##name}
#define GPUMEMSHIM_ENTRY_NS(name, base, version) \
  {#name, base, version, false, reinterpret_cast<void*>(&::name), &slot_##name}

DriverEntry g_driver_entries[] = {
    GPUMEMSHIM_ENTRY(cuMemAlloc_v2, "cuMemAlloc", 3020, false),
    GPUMEMSHIM_ENTRY(cuMemFree_v2, "cuMemFree", 3020, false),
    GPUMEMSHIM_ENTRY(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, false),
    GPUMEMSHIM_ENTRY(cuMemAllocManaged, "cuMemAllocManaged", 0, false),
    GPUMEMSHIM_ENTRY(cuMemAllocAsync, "cuMemAllocAsync", 0, false),
    GPUMEMSHIM_ENTRY(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 0, true),
    GPUMEMSHIM_ENTRY(cuMemFreeAsync, "cuMemFreeAsync", 0, false),
    GPUMEMSHIM_ENTRY(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 0, true),
    GPUMEMSHIM_ENTRY(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 0, false),
    GPUMEMSHIM_ENTRY(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 0, true),
    GPUMEMSHIM_ENTRY(cuMemCreate, "cuMemCreate", 0, false),
    GPUMEMSHIM_ENTRY(cuMemRelease, "cuMemRelease", 0, false),
    GPUMEMSHIM_ENTRY(cuMemMap, "cuMemMap", 0, false),
    GPUMEMSHIM_ENTRY(cuMemUnmap, "cuMemUnmap", 0, false),
    GPUMEMSHIM_ENTRY(cuMemAddressReserve, "cuMemAddressReserve", 0, false),
    GPUMEMSHIM_ENTRY(cuMemAddressFree, "cuMemAddressFree", 0, false),
    GPUMEMSHIM_ENTRY(cuMemHostAlloc, "cuMemHostAlloc", 0, false),
    GPUMEMSHIM_ENTRY(cuMemAllocHost_v2, "cuMemAllocHost", 3020, false),
    GPUMEMSHIM_ENTRY(cuMemFreeHost, "cuMemFreeHost", 0, false),
    GPUMEMSHIM_ENTRY(cuMemGetInfo_v2, "cuMemGetInfo", 3020, false),
    GPUMEMSHIM_ENTRY_NS(cuGetProcAddress_v2, "cuGetProcAddress", 12000),
    GPUMEMSHIM_ENTRY_NS(cuGetProcAddress, "cuGetProcAddress", 11030),
};
extern const size_t g_driver_entry_count = sizeof g_driver_entries / sizeof g_driver_entries[0];

}  // namespace gpumemshim::shim

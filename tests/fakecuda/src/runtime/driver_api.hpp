// The runtime's view of the driver: loaded lazily with dlopen("libcuda.so.1")
// and resolved entry point by entry point through cuGetProcAddress_v2.
#pragma once

#define FAKECUDA_NO_API_REDIRECT
#include <fakecuda/cuda.h>
#include <fakecuda/cuda_runtime_api.h>

#include "../common/config.hpp"

namespace fakecuda::rt {

// X(member, base name asked from the driver, exported symbol giving the type, flags)
#define FAKECUDA_DRIVER_ENTRIES(X)                                                              \
  X(init, "cuInit", cuInit, 0)                                                                  \
  X(driver_get_version, "cuDriverGetVersion", cuDriverGetVersion, 0)                            \
  X(device_get_count, "cuDeviceGetCount", cuDeviceGetCount, 0)                                  \
  X(primary_ctx_retain, "cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain, 0)                \
  X(primary_ctx_reset, "cuDevicePrimaryCtxReset", cuDevicePrimaryCtxReset_v2, 0)                \
  X(ctx_set_current, "cuCtxSetCurrent", cuCtxSetCurrent, 0)                                     \
  X(mem_alloc, "cuMemAlloc", cuMemAlloc_v2, 0)                                                  \
  X(mem_free, "cuMemFree", cuMemFree_v2, 0)                                                     \
  X(mem_alloc_pitch, "cuMemAllocPitch", cuMemAllocPitch_v2, 0)                                  \
  X(mem_alloc_managed, "cuMemAllocManaged", cuMemAllocManaged, 0)                               \
  X(mem_host_alloc, "cuMemHostAlloc", cuMemHostAlloc, 0)                                        \
  X(mem_alloc_host, "cuMemAllocHost", cuMemAllocHost_v2, 0)                                     \
  X(mem_free_host, "cuMemFreeHost", cuMemFreeHost, 0)                                           \
  X(mem_get_info, "cuMemGetInfo", cuMemGetInfo_v2, 0)                                           \
  X(mem_alloc_async, "cuMemAllocAsync", cuMemAllocAsync, 0)                                     \
  X(mem_alloc_async_ptsz, "cuMemAllocAsync", cuMemAllocAsync_ptsz, 2)                           \
  X(mem_free_async, "cuMemFreeAsync", cuMemFreeAsync, 0)                                        \
  X(mem_free_async_ptsz, "cuMemFreeAsync", cuMemFreeAsync_ptsz, 2)                              \
  X(mem_alloc_from_pool_async, "cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync, 0)           \
  X(mem_alloc_from_pool_async_ptsz, "cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync_ptsz, 2) \
  X(device_get_default_mem_pool, "cuDeviceGetDefaultMemPool", cuDeviceGetDefaultMemPool, 0)     \
  X(mem_pool_create, "cuMemPoolCreate", cuMemPoolCreate, 0)                                     \
  X(mem_pool_destroy, "cuMemPoolDestroy", cuMemPoolDestroy, 0)                                  \
  X(mem_pool_trim_to, "cuMemPoolTrimTo", cuMemPoolTrimTo, 0)

struct Driver {
  decltype(&cuGetProcAddress_v2) get_proc_address;
#define FAKECUDA_DECLARE_ENTRY(member, name, symbol, flags) decltype(&symbol) member;
  FAKECUDA_DRIVER_ENTRIES(FAKECUDA_DECLARE_ENTRY)
#undef FAKECUDA_DECLARE_ENTRY
};

// The loaded driver, or nullptr with *err set (and recorded as last error).
const Driver* driver(cudaError_t* err);

// Driver status -> runtime status (as the real runtime maps them), recorded
// as the thread's last error when not a success.
cudaError_t finish(CUresult rc);
// Records a runtime-side error as the last error and returns it.
cudaError_t record(cudaError_t err);
// FAKECUDA_FAIL check for runtime function `name`: 0 or the recorded error.
cudaError_t injected(const char* name);

// Thread's last error; reset clears it (cudaGetLastError).
cudaError_t take_last_error(bool reset);

// Thread's current device (cudaSetDevice).
int& current_device();

}  // namespace fakecuda::rt

// Loads the driver (or returns its error) and applies FAKECUDA_FAIL for `name`.
#define FAKECUDA_RT_ENTER(name, drv)                                          \
  cudaError_t fakecuda_err_ = cudaSuccess;                                    \
  const ::fakecuda::rt::Driver* drv = ::fakecuda::rt::driver(&fakecuda_err_); \
  if (drv == nullptr) return fakecuda_err_;                                   \
  if (cudaError_t fakecuda_inj_ = ::fakecuda::rt::injected(name)) return fakecuda_inj_

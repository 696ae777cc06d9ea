// Runtime memory API, forwarded to the driver entry points.
#include <cstring>

#include "driver_api.hpp"

using namespace fakecuda::rt;

namespace {

template <typename Fn, typename... Args>
cudaError_t alloc_dptr(void** out, Fn fn, Args... args) {
  if (out == nullptr) return record(cudaErrorInvalidValue);
  CUdeviceptr p = 0;
  cudaError_t err = finish(fn(&p, args...));
  if (err == cudaSuccess) *out = reinterpret_cast<void*>(p);
  return err;
}

CUdeviceptr dptr(void* p) {
  return reinterpret_cast<CUdeviceptr>(p);
}

}  // namespace

extern "C" {

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  FAKECUDA_RT_ENTER("cudaMalloc", d);
  if (devPtr != nullptr && size == 0) {
    *devPtr = nullptr;  // the real runtime succeeds without allocating
    return cudaSuccess;
  }
  return alloc_dptr(devPtr, d->mem_alloc, size);
}

cudaError_t cudaFree(void* devPtr) {
  FAKECUDA_RT_ENTER("cudaFree", d);
  if (devPtr == nullptr) return cudaSuccess;
  return finish(d->mem_free(dptr(devPtr)));
}

cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  FAKECUDA_RT_ENTER("cudaMallocManaged", d);
  return alloc_dptr(devPtr, d->mem_alloc_managed, size, flags);
}

cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
  FAKECUDA_RT_ENTER("cudaMallocPitch", d);
  if (pitch == nullptr) return record(cudaErrorInvalidValue);
  return alloc_dptr(devPtr, d->mem_alloc_pitch, pitch, width, height, 4u);
}

cudaError_t cudaMalloc3D(struct cudaPitchedPtr* pitchedDevPtr, struct cudaExtent extent) {
  FAKECUDA_RT_ENTER("cudaMalloc3D", d);
  if (pitchedDevPtr == nullptr) return record(cudaErrorInvalidValue);
  const size_t rows = extent.height * extent.depth;
  size_t pitch = 0;
  void* p = nullptr;
  cudaError_t err = alloc_dptr(&p, d->mem_alloc_pitch, &pitch, extent.width, rows, 4u);
  if (err == cudaSuccess) *pitchedDevPtr = cudaPitchedPtr{p, pitch, extent.width, extent.height};
  return err;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  FAKECUDA_RT_ENTER("cudaMallocHost", d);
  return finish(d->mem_alloc_host(ptr, size));
}

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  FAKECUDA_RT_ENTER("cudaHostAlloc", d);
  return finish(d->mem_host_alloc(pHost, size, flags));
}

cudaError_t cudaFreeHost(void* ptr) {
  FAKECUDA_RT_ENTER("cudaFreeHost", d);
  if (ptr == nullptr) return cudaSuccess;
  return finish(d->mem_free_host(ptr));
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  FAKECUDA_RT_ENTER("cudaMemGetInfo", d);
  return finish(d->mem_get_info(free, total));
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  FAKECUDA_RT_ENTER("cudaMemcpy", d);
  (void)d;
  if (static_cast<unsigned>(kind) > cudaMemcpyDefault)
    return record(cudaErrorInvalidMemcpyDirection);
  if (count == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return record(cudaErrorInvalidValue);
  std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
  FAKECUDA_RT_ENTER("cudaMemset", d);
  (void)d;
  if (count == 0) return cudaSuccess;
  if (devPtr == nullptr) return record(cudaErrorInvalidValue);
  std::memset(devPtr, value, count);
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
  FAKECUDA_RT_ENTER("cudaMallocAsync", d);
  return alloc_dptr(devPtr, d->mem_alloc_async, size, hStream);
}

cudaError_t cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t hStream) {
  FAKECUDA_RT_ENTER("cudaMallocAsync_ptsz", d);
  return alloc_dptr(devPtr, d->mem_alloc_async_ptsz, size, hStream);
}

cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
  FAKECUDA_RT_ENTER("cudaFreeAsync", d);
  return finish(d->mem_free_async(dptr(devPtr), hStream));
}

cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t hStream) {
  FAKECUDA_RT_ENTER("cudaFreeAsync_ptsz", d);
  return finish(d->mem_free_async_ptsz(dptr(devPtr), hStream));
}

cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool,
                                    cudaStream_t stream) {
  FAKECUDA_RT_ENTER("cudaMallocFromPoolAsync", d);
  return alloc_dptr(ptr, d->mem_alloc_from_pool_async, size, memPool, stream);
}

cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t memPool,
                                         cudaStream_t stream) {
  FAKECUDA_RT_ENTER("cudaMallocFromPoolAsync_ptsz", d);
  return alloc_dptr(ptr, d->mem_alloc_from_pool_async_ptsz, size, memPool, stream);
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* memPool, int device) {
  FAKECUDA_RT_ENTER("cudaDeviceGetDefaultMemPool", d);
  return finish(d->device_get_default_mem_pool(memPool, device));
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t* memPool, const struct cudaMemPoolProps* poolProps) {
  FAKECUDA_RT_ENTER("cudaMemPoolCreate", d);
  static_assert(sizeof(cudaMemPoolProps) == sizeof(CUmemPoolProps));
  return finish(d->mem_pool_create(memPool, reinterpret_cast<const CUmemPoolProps*>(poolProps)));
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool) {
  FAKECUDA_RT_ENTER("cudaMemPoolDestroy", d);
  return finish(d->mem_pool_destroy(memPool));
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep) {
  FAKECUDA_RT_ENTER("cudaMemPoolTrimTo", d);
  return finish(d->mem_pool_trim_to(memPool, minBytesToKeep));
}

}  // extern "C"

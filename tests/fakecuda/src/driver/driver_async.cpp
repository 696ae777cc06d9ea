// Stream-ordered allocation (immediate in the fake) and memory pools.
#include <array>
#include <mutex>
#include <unordered_set>

#include "state.hpp"

using namespace fakecuda::drv;

struct CUmemPoolHandle_st {
  int device;
};

namespace {

std::array<CUmemPoolHandle_st, kMaxDevices> make_default_pools() {
  std::array<CUmemPoolHandle_st, kMaxDevices> pools{};
  for (int i = 0; i < kMaxDevices; ++i) pools[static_cast<std::size_t>(i)].device = i;
  return pools;
}

std::array<CUmemPoolHandle_st, kMaxDevices> g_default_pools = make_default_pools();

struct PoolSet {
  std::mutex mu;
  std::unordered_set<CUmemoryPool> created;
};

PoolSet& pools() {
  static PoolSet* p = new PoolSet();
  return *p;
}

bool is_default(CUmemoryPool pool) {
  return pool >= &g_default_pools[0] && pool < &g_default_pools[0] + kMaxDevices &&
         valid_device(pool->device);
}

// Device of a known pool, or -1.
int pool_device(CUmemoryPool pool) {
  if (pool == nullptr) return -1;
  if (is_default(pool)) return pool->device;
  PoolSet& ps = pools();
  std::lock_guard<std::mutex> lock(ps.mu);
  return ps.created.count(pool) != 0 ? pool->device : -1;
}

CUresult alloc_on(CUdeviceptr* dptr, std::size_t bytes, int dev) {
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  void* p = nullptr;
  CUresult rc = allocate(bytes, Kind::Async, dev, &p);
  if (rc == CUDA_SUCCESS) *dptr = reinterpret_cast<CUdeviceptr>(p);
  return rc;
}

CUresult alloc_from_pool(CUdeviceptr* dptr, std::size_t bytes, CUmemoryPool pool) {
  const int dev = pool_device(pool);
  if (dev < 0) return CUDA_ERROR_INVALID_VALUE;
  return alloc_on(dptr, bytes, dev);
}

}  // namespace

extern "C" {

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream) {
  FAKECUDA_INJECT("cuMemAllocAsync");
  return alloc_on(dptr, bytesize, current_device());
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream) {
  FAKECUDA_INJECT("cuMemAllocAsync_ptsz");
  return alloc_on(dptr, bytesize, current_device());
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream) {
  FAKECUDA_INJECT("cuMemFreeAsync");
  return release(reinterpret_cast<void*>(dptr), false);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream) {
  FAKECUDA_INJECT("cuMemFreeAsync_ptsz");
  return release(reinterpret_cast<void*>(dptr), false);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream) {
  FAKECUDA_INJECT("cuMemAllocFromPoolAsync");
  return alloc_from_pool(dptr, bytesize, pool);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream) {
  FAKECUDA_INJECT("cuMemAllocFromPoolAsync_ptsz");
  return alloc_from_pool(dptr, bytesize, pool);
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  FAKECUDA_INJECT("cuDeviceGetDefaultMemPool");
  if (pool_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pool_out = &g_default_pools[static_cast<std::size_t>(dev)];
  return CUDA_SUCCESS;
}

CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  FAKECUDA_INJECT("cuMemPoolCreate");
  if (pool == nullptr || poolProps == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(poolProps->location.id)) return CUDA_ERROR_INVALID_DEVICE;
  auto* p = new CUmemPoolHandle_st{poolProps->location.id};
  PoolSet& ps = pools();
  std::lock_guard<std::mutex> lock(ps.mu);
  ps.created.insert(p);
  *pool = p;
  return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  FAKECUDA_INJECT("cuMemPoolDestroy");
  PoolSet& ps = pools();
  {
    std::lock_guard<std::mutex> lock(ps.mu);
    if (ps.created.erase(pool) == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  delete pool;
  return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t) {
  FAKECUDA_INJECT("cuMemPoolTrimTo");
  return pool_device(pool) >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

}  // extern "C"

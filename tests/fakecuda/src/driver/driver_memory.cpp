// Linear device memory, managed memory, pinned host memory and usage queries.
#include "state.hpp"

using namespace fakecuda::drv;

namespace {

CUresult alloc_device(CUdeviceptr* dptr, std::size_t bytes, Kind kind) {
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  void* p = nullptr;
  CUresult rc = allocate(bytes, kind, current_device(), &p);
  if (rc == CUDA_SUCCESS) *dptr = reinterpret_cast<CUdeviceptr>(p);
  return rc;
}

CUresult alloc_host(void** pp, std::size_t bytes) {
  if (pp == nullptr) return CUDA_ERROR_INVALID_VALUE;
  void* p = nullptr;
  CUresult rc = allocate(bytes, Kind::Host, -1, &p);
  if (rc == CUDA_SUCCESS) *pp = p;
  return rc;
}

}  // namespace

extern "C" {

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  FAKECUDA_INJECT("cuMemAlloc_v2");
  return alloc_device(dptr, bytesize, Kind::Device);
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  FAKECUDA_INJECT("cuMemFree_v2");
  return release(reinterpret_cast<void*>(dptr), false);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) {
  FAKECUDA_INJECT("cuMemAllocPitch_v2");
  if (dptr == nullptr || pPitch == nullptr || WidthInBytes == 0 || Height == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16)
    return CUDA_ERROR_INVALID_VALUE;
  constexpr std::size_t kPitchAlign = 512;
  const std::size_t pitch = (WidthInBytes + kPitchAlign - 1) / kPitchAlign * kPitchAlign;
  if (Height > SIZE_MAX / pitch) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = alloc_device(dptr, pitch * Height, Kind::Pitch);
  if (rc == CUDA_SUCCESS) *pPitch = pitch;
  return rc;
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  FAKECUDA_INJECT("cuMemAllocManaged");
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  return alloc_device(dptr, bytesize, Kind::Managed);
}

CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  FAKECUDA_INJECT("cuMemHostAlloc");
  constexpr unsigned kKnown =
      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if ((Flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
  return alloc_host(pp, bytesize);
}

CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  FAKECUDA_INJECT("cuMemAllocHost_v2");
  return alloc_host(pp, bytesize);
}

CUresult cuMemFreeHost(void* p) {
  FAKECUDA_INJECT("cuMemFreeHost");
  return release(p, true);
}

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  FAKECUDA_INJECT("cuMemGetInfo_v2");
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t t = fakecuda::config().total_mem;
  const std::size_t used = used_on(current_device());
  *total = t;
  *free = used < t ? t - used : 0;
  return CUDA_SUCCESS;
}

}  // extern "C"

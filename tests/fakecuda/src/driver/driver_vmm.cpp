// Virtual memory management: address reservations, physical handles, mappings.
// Physical handles are not backed by shared pages: a mapping gets fresh
// zeroed anonymous pages, so two mappings of one handle do not alias.
#include <sys/mman.h>

#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <unordered_map>

#include "state.hpp"

using namespace fakecuda::drv;

namespace {

struct Handle {
  std::size_t bytes;
  int device;
};

struct Mapping {
  std::size_t bytes;
  CUmemGenericAllocationHandle handle;
};

struct Vmm {
  std::mutex mu;
  std::map<std::uintptr_t, std::size_t> reservations;  // base -> size
  std::map<std::uintptr_t, Mapping> mappings;          // base -> mapping
  std::unordered_map<CUmemGenericAllocationHandle, Handle> handles;
  CUmemGenericAllocationHandle next_handle = 1;
};

Vmm& vmm() {
  static Vmm* v = new Vmm();
  return *v;
}

bool aligned(std::uintptr_t v) {
  return v % kGranularity == 0;
}

bool valid_device_prop(const CUmemAllocationProp* prop) {
  return prop != nullptr && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
         prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && valid_device(prop->location.id);
}

// True when [p, p+n) lies inside one reservation. Caller holds the lock.
bool inside_reservation(const Vmm& v, std::uintptr_t p, std::size_t n) {
  auto it = v.reservations.upper_bound(p);
  if (it == v.reservations.begin()) return false;
  --it;
  return p >= it->first && p - it->first <= it->second && n <= it->second - (p - it->first);
}

// True when [p, p+n) overlaps an existing mapping. Caller holds the lock.
bool overlaps_mapping(const Vmm& v, std::uintptr_t p, std::size_t n) {
  auto it = v.mappings.lower_bound(p);
  if (it != v.mappings.end() && it->first < p + n) return true;
  if (it == v.mappings.begin()) return false;
  --it;
  return it->first + it->second.bytes > p;
}

void drop_pages(std::uintptr_t p, std::size_t n) {
  mmap(reinterpret_cast<void*>(p), n, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

}  // namespace

extern "C" {

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags option) {
  FAKECUDA_INJECT("cuMemGetAllocationGranularity");
  if (granularity == nullptr || !valid_device_prop(prop)) return CUDA_ERROR_INVALID_VALUE;
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    return CUDA_ERROR_INVALID_VALUE;
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr,
                             unsigned long long flags) {
  FAKECUDA_INJECT("cuMemAddressReserve");
  if (ptr == nullptr || size == 0 || !aligned(size) || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (alignment != 0 && (alignment & (alignment - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t align = alignment > kGranularity ? alignment : kGranularity;
  if (size > SIZE_MAX - align) return CUDA_ERROR_OUT_OF_MEMORY;
  const std::size_t span = size + align;
  void* raw = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t base = (start + align - 1) / align * align;
  if (base > start) munmap(raw, base - start);
  if (start + span > base + size)
    munmap(reinterpret_cast<void*>(base + size), start + span - (base + size));
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  v.reservations[base] = size;
  *ptr = base;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  FAKECUDA_INJECT("cuMemAddressFree");
  Vmm& v = vmm();
  {
    std::lock_guard<std::mutex> lock(v.mu);
    auto it = v.reservations.find(ptr);
    if (it == v.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
    if (overlaps_mapping(v, ptr, size)) return CUDA_ERROR_INVALID_VALUE;
    v.reservations.erase(it);
  }
  munmap(reinterpret_cast<void*>(ptr), size);
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
  FAKECUDA_INJECT("cuMemCreate");
  if (handle == nullptr || size == 0 || !aligned(size) || flags != 0 || !valid_device_prop(prop))
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult rc = charge(prop->location.id, size); rc != CUDA_SUCCESS) return rc;
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  const CUmemGenericAllocationHandle h = v.next_handle++;
  v.handles[h] = Handle{size, prop->location.id};
  *handle = h;
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  FAKECUDA_INJECT("cuMemRelease");
  Vmm& v = vmm();
  Handle h{};
  {
    std::lock_guard<std::mutex> lock(v.mu);
    auto it = v.handles.find(handle);
    if (it == v.handles.end()) return CUDA_ERROR_INVALID_VALUE;
    h = it->second;
    v.handles.erase(it);
  }
  uncharge(h.device, h.bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  FAKECUDA_INJECT("cuMemMap");
  if (size == 0 || !aligned(ptr) || !aligned(size) || !aligned(offset) || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  auto h = v.handles.find(handle);
  if (h == v.handles.end()) return CUDA_ERROR_INVALID_VALUE;
  if (offset > h->second.bytes || size > h->second.bytes - offset) return CUDA_ERROR_INVALID_VALUE;
  if (!inside_reservation(v, ptr, size)) return CUDA_ERROR_INVALID_VALUE;
  if (overlaps_mapping(v, ptr, size)) return CUDA_ERROR_ALREADY_MAPPED;
  if (mprotect(reinterpret_cast<void*>(ptr), size, PROT_READ | PROT_WRITE) != 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  v.mappings[ptr] = Mapping{size, handle};
  return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  FAKECUDA_INJECT("cuMemUnmap");
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  auto first = v.mappings.find(ptr);
  if (first == v.mappings.end() || size == 0) return CUDA_ERROR_INVALID_VALUE;
  // The range must consist of whole mappings.
  auto last = v.mappings.lower_bound(ptr + size);
  if (std::prev(last)->first + std::prev(last)->second.bytes > ptr + size)
    return CUDA_ERROR_INVALID_VALUE;
  for (auto it = first; it != last; ++it) drop_pages(it->first, it->second.bytes);
  v.mappings.erase(first, last);
  return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  FAKECUDA_INJECT("cuMemSetAccess");
  if (desc == nullptr || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_device(desc[i].location.id))
      return CUDA_ERROR_INVALID_DEVICE;
  }
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  // Every byte of the range must be mapped, contiguously.
  auto it = v.mappings.upper_bound(ptr);
  if (it == v.mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  std::uintptr_t covered = ptr;
  for (; it != v.mappings.end() && it->first <= covered && covered < ptr + size; ++it)
    covered = it->first + it->second.bytes;
  if (covered < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  const CUmemAccess_flags f = desc[count - 1].flags;
  const int prot = f == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
                   : f == CU_MEM_ACCESS_FLAGS_PROT_READ    ? PROT_READ
                                                           : PROT_NONE;
  mprotect(reinterpret_cast<void*>(ptr), size, prot);
  return CUDA_SUCCESS;
}

}  // extern "C"

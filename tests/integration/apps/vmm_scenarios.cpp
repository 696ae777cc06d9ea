// Linked with the (fake) shared cudart like PyTorch: VMM through cudaGetDriverEntryPointByVersion
// as expandable segments does, driver calls through -lcuda symbol binding, runtime calls that reach
// the driver (recorded once), and exec (the preload is inherited by the new image).
#include <fakecuda/cuda.h>
#include <fakecuda/cuda_runtime_api.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr size_t kSegment = 2 << 20;

template <typename Fn>
Fn runtime_entry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &status) != cudaSuccess ||
      !fn) {
    std::fprintf(stderr, "cannot resolve %s\n", name);
    std::exit(3);
  }
  return reinterpret_cast<Fn>(fn);
}

// The VMM entry points, found as expandable segments finds them.
struct Vmm {
  decltype(&cuMemAddressReserve) reserve = runtime_entry<decltype(reserve)>("cuMemAddressReserve");
  decltype(&cuMemCreate) create = runtime_entry<decltype(create)>("cuMemCreate");
  decltype(&cuMemMap) map = runtime_entry<decltype(map)>("cuMemMap");
  decltype(&cuMemUnmap) unmap = runtime_entry<decltype(unmap)>("cuMemUnmap");
  decltype(&cuMemRelease) release = runtime_entry<decltype(release)>("cuMemRelease");
  decltype(&cuMemAddressFree) address_free = runtime_entry<decltype(address_free)>("cuMemAddressFree");
};

__attribute__((noinline)) CUmemGenericAllocationHandle create_physical(
    decltype(&cuMemCreate) create, size_t bytes) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle h = 0;
  if (create(&h, bytes, &prop, 0) != CUDA_SUCCESS) std::exit(3);  // site: cuMemCreate
  return h;
}

// An expandable segment: reserve address space, map physical chunks into it, and on shrink unmap
// and release them. The last chunk is never released: a leak of physical memory.
int scenario_vmm() {
  const Vmm vmm;
  auto [reserve, create, map, unmap, release, address_free] = vmm;
  CUdeviceptr scratch = 0, base = 0;
  if (reserve(&scratch, kSegment, 0, 0, 0) != CUDA_SUCCESS) return 3;
  if (address_free(scratch, kSegment) != CUDA_SUCCESS) return 3;
  if (reserve(&base, 8 * kSegment, 0, 0, 0) != CUDA_SUCCESS) return 3;
  CUmemGenericAllocationHandle chunks[3];
  for (int i = 0; i < 3; ++i) {
    chunks[i] = create_physical(create, kSegment);
    if (map(base + i * kSegment, kSegment, 0, chunks[i], 0) != CUDA_SUCCESS) return 3;
  }
  for (int i = 0; i < 2; ++i) {
    if (unmap(base + i * kSegment, kSegment) != CUDA_SUCCESS) return 3;
    if (release(chunks[i]) != CUDA_SUCCESS) return 3;
  }
  // chunks[2] stays mapped and allocated; the reservation stays too.
  std::printf("done\n");
  return 0;
}

// CUDA's own idiom: map each chunk, release its handle at once, use the memory through the
// mapping, free it all with one cuMemUnmap of the whole range. The memory is allocated until that
// unmap. With `keep_last`, the last chunk's mapping is never unmapped: its memory leaks, though its
// handle was released.
int scenario_map_release(bool keep_last) {
  const Vmm vmm;
  auto [reserve, create, map, unmap, release, address_free] = vmm;
  CUdeviceptr base = 0;
  if (reserve(&base, 3 * kSegment, 0, 0, 0) != CUDA_SUCCESS) return 3;
  for (int i = 0; i < 3; ++i) {
    CUmemGenericAllocationHandle h = create_physical(create, kSegment);
    if (map(base + i * kSegment, kSegment, 0, h, 0) != CUDA_SUCCESS) return 3;  // site: cuMemMap
    if (release(h) != CUDA_SUCCESS) return 3;
  }
  std::memset(reinterpret_cast<void*>(base), 1, 3 * kSegment);
  if (unmap(base, (keep_last ? 2 : 3) * kSegment) != CUDA_SUCCESS) return 3;
  if (!keep_last && address_free(base, 3 * kSegment) != CUDA_SUCCESS) return 3;
  std::printf("done\n");
  return 0;
}

// Runtime calls whose driver calls are also interposed: each must be one event.
int scenario_runtime_once() {
  for (int i = 0; i < 5; ++i) {
    void* p = nullptr;
    if (cudaMalloc(&p, 4096) != cudaSuccess) return 3;
    if (cudaFree(p) != cudaSuccess) return 3;
  }
  void* h = nullptr;
  if (cudaMallocHost(&h, 8192) != cudaSuccess) return 3;
  if (cudaFreeHost(h) != cudaSuccess) return 3;
  std::printf("done\n");
  return 0;
}

// A program linked with -lcuda calling the driver directly.
int scenario_driver_direct() {
  CUdeviceptr p = 0, q = 0;
  if (cuMemAlloc(&p, 7000) != CUDA_SUCCESS) return 3;
  if (cuMemFree(p) != CUDA_SUCCESS) return 3;
  if (cuMemAlloc(&q, 9000) != CUDA_SUCCESS) return 3;  // site: driver direct leak
  std::printf("done\n");
  return 0;
}

// Leaks, then replaces itself with a new image that leaks again.
int scenario_exec(const char* self) {
  void* p = nullptr;
  if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return 3;  // site: before exec
  std::fflush(stdout);
  execl(self, self, "driver-direct", static_cast<char*>(nullptr));
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  std::string s = argc > 1 ? argv[1] : "";
  if (s == "vmm") return scenario_vmm();
  if (s == "map-release") return scenario_map_release(false);
  if (s == "map-release-leak") return scenario_map_release(true);
  if (s == "runtime-once") return scenario_runtime_once();
  if (s == "driver-direct") return scenario_driver_direct();
  if (s == "exec") return scenario_exec("/proc/self/exe");
  std::fprintf(stderr, "usage: vmm_scenarios vmm|map-release|map-release-leak|runtime-once|driver-direct|exec\n");
  return 2;
}

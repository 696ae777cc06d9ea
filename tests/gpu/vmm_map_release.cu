// H200 scenario: CUDA's documented map-then-release idiom (as in cuda-samples' vectorAddMMAP).
// Three physical handles are created, each mapped and released at once: the memory stays allocated
// until its mapping goes. "clean" unmaps all three at the end; "keep" leaves the last one mapped, a
// leak at the cuMemMap line. Prints the granularity so the check knows the sizes.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#define CHECK(x)                                                   \
  do {                                                             \
    CUresult r_ = (x);                                             \
    if (r_ != CUDA_SUCCESS) {                                      \
      std::fprintf(stderr, "%s failed: %d\n", #x, static_cast<int>(r_)); \
      return 1;                                                    \
    }                                                              \
  } while (0)

__global__ void touch(char* p, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) p[i] = 1;
}

int main(int argc, char** argv) {
  bool keep = argc > 1 && std::strcmp(argv[1], "keep") == 0;
  cudaFree(nullptr);  // the runtime's primary context, current on this thread
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  const size_t size = gran;  // 2 MiB on current GPUs
  CUdeviceptr va = 0;
  CHECK(cuMemAddressReserve(&va, 3 * size, 0, 0, 0));
  for (int i = 0; i < 3; ++i) {
    CUmemGenericAllocationHandle h;
    CHECK(cuMemCreate(&h, size, &prop, 0));  // site: create
    CHECK(cuMemMap(va + i * size, size, 0, h, 0));  // site: map
    CHECK(cuMemRelease(h));  // the mapping keeps the memory
  }
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK(cuMemSetAccess(va, 3 * size, &access, 1));
  touch<<<(3 * size + 255) / 256, 256>>>(reinterpret_cast<char*>(va), 3 * size);
  cudaDeviceSynchronize();
  for (int i = 0; i < (keep ? 2 : 3); ++i) CHECK(cuMemUnmap(va + i * size, size));
  if (!keep) CHECK(cuMemAddressFree(va, 3 * size));
  std::printf("granularity=%zu\n", gran);
  return 0;
}

// Reaches the driver the way a statically linked cudart (nvcc's default) and NCCL do: no runtime
// symbols at all; dlopen libcuda.so.1, dlsym cuGetProcAddress_v2, then entry points by base name,
// with a CUDA version and per-thread-stream flags. Symbol interposition alone sees none of this.
#include <dlfcn.h>
#include <fakecuda/cuda.h>

#include <cstdio>
#include <cstdlib>

namespace {

using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using MemAlloc = CUresult (*)(CUdeviceptr*, size_t);
using MemFree = CUresult (*)(CUdeviceptr);
using MemAllocAsync = CUresult (*)(CUdeviceptr*, size_t, CUstream);
using MemFreeAsync = CUresult (*)(CUdeviceptr, CUstream);

GetProc get_proc = nullptr;

template <typename Fn>
Fn entry(const char* base, cuuint64_t flags = CU_GET_PROC_ADDRESS_DEFAULT, int version = 12080) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  if (get_proc(base, &fn, version, flags, &status) != CUDA_SUCCESS || !fn) {
    std::fprintf(stderr, "cannot resolve %s\n", base);
    std::exit(3);
  }
  return reinterpret_cast<Fn>(fn);
}

}  // namespace

int main() {
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!libcuda) return 3;
  get_proc = reinterpret_cast<GetProc>(dlsym(libcuda, "cuGetProcAddress_v2"));
  if (!get_proc) return 3;
  // Asking for cuGetProcAddress itself must give a resolver that still records.
  get_proc = entry<GetProc>("cuGetProcAddress");

  // An old runtime asking for cuMemAlloc at CUDA 3.0 must get what the driver gives (here: no v1),
  // never the shim's cuMemAlloc_v2 wrapper.
  void* old_alloc = nullptr;
  CUdriverProcAddressQueryResult old_status{};
  CUresult old_rc = get_proc("cuMemAlloc", &old_alloc, 3000, 0, &old_status);
  std::printf("old cuMemAlloc: rc=%d fn=%s\n", static_cast<int>(old_rc), old_alloc ? "set" : "null");
  // Names the shim does not record pass through untouched.
  void* get_name = nullptr;
  get_proc("cuDeviceGetName", &get_name, 12080, 0, &old_status);
  std::printf("cuDeviceGetName is the driver's own: %s\n",
              get_name == dlsym(libcuda, "cuDeviceGetName") ? "yes" : "no");

  auto mem_alloc = entry<MemAlloc>("cuMemAlloc");
  auto mem_free = entry<MemFree>("cuMemFree");
  auto alloc_async = entry<MemAllocAsync>("cuMemAllocAsync", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  auto free_async = entry<MemFreeAsync>("cuMemFreeAsync", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);

  CUdeviceptr kept = 0, freed = 0, async_ptr = 0;
  if (mem_alloc(&freed, 1000) != CUDA_SUCCESS) return 3;
  if (mem_free(freed) != CUDA_SUCCESS) return 3;
  if (alloc_async(&async_ptr, 3000, nullptr) != CUDA_SUCCESS) return 3;
  if (free_async(async_ptr, nullptr) != CUDA_SUCCESS) return 3;
  if (mem_alloc(&kept, 5 << 20) != CUDA_SUCCESS) return 3;  // site: static leak
  std::printf("done\n");
  return 0;
}

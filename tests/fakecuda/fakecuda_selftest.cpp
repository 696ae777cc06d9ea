// Self test of the fake CUDA (libcudart.so.13 + libcuda.so.1).
// Suites named Env* need environment variables set by their ctest entry
// (see CMakeLists.txt) and skip otherwise.
#include <dlfcn.h>
#include <gtest/gtest.h>

#define FAKECUDA_NO_API_REDIRECT
#include <fakecuda/cuda.h>
#include <fakecuda/cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;

void* driver_handle() {
  static void* h = dlopen("libcuda.so.1", RTLD_NOW);
  return h;
}

decltype(&cuGetProcAddress_v2) get_proc() {
  return reinterpret_cast<decltype(&cuGetProcAddress_v2)>(
      dlsym(driver_handle(), "cuGetProcAddress_v2"));
}

// Resolves a driver entry point by base name, as PyTorch does.
template <typename Fn>
Fn resolve(const char* base, int version = 13000, cuuint64_t flags = 0) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  EXPECT_EQ(get_proc()(base, &fn, version, flags, &st), CUDA_SUCCESS) << base;
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SUCCESS) << base;
  return reinterpret_cast<Fn>(fn);
}

size_t used_bytes() {
  size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return total - free;
}

CUmemAllocationProp device_prop(int dev = 0) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  return prop;
}

}  // namespace

TEST(Runtime, AllocMemcpyFree) {
  const size_t before = used_bytes();
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, kMiB), cudaSuccess);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(used_bytes(), before + kMiB);

  std::vector<int> in(kMiB / sizeof(int)), out(in.size(), 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i * 7);
  ASSERT_EQ(cudaMemcpy(d, in.data(), kMiB, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), d, kMiB, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(in, out);
  ASSERT_EQ(cudaMemset(d, 0, kMiB), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), d, kMiB, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(out[12345], 0);

  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(used_bytes(), before);
  EXPECT_EQ(cudaFree(nullptr), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaErrorInvalidValue);  // double free: unknown pointer
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(Runtime, HugeAllocationIsCheap) {
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  EXPECT_EQ(total, size_t{85899345920});
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 40 * kGiB), cudaSuccess);
  static_cast<char*>(d)[40 * kGiB - 1] = 1;  // touch one page only
  EXPECT_EQ(used_bytes(), 40 * kGiB);
  void* too_big = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(cudaMalloc(&too_big, 41 * kGiB), cudaErrorMemoryAllocation);
  EXPECT_EQ(too_big, reinterpret_cast<void*>(0x1));
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  cudaGetLastError();
}

TEST(Runtime, PitchManagedAndHost) {
  const size_t before = used_bytes();
  void* p = nullptr;
  size_t pitch = 0;
  ASSERT_EQ(cudaMallocPitch(&p, &pitch, 1000, 10), cudaSuccess);
  EXPECT_EQ(pitch, 1024u);
  EXPECT_EQ(used_bytes(), before + 10240);
  EXPECT_EQ(cudaFree(p), cudaSuccess);

  cudaPitchedPtr pp{};
  ASSERT_EQ(cudaMalloc3D(&pp, cudaExtent{100, 4, 3}), cudaSuccess);
  EXPECT_EQ(pp.pitch, 512u);
  EXPECT_EQ(pp.xsize, 100u);
  EXPECT_EQ(pp.ysize, 4u);
  EXPECT_EQ(used_bytes(), before + 512 * 12);
  EXPECT_EQ(cudaFree(pp.ptr), cudaSuccess);

  void* m = nullptr;
  ASSERT_EQ(cudaMallocManaged(&m, kMiB, cudaMemAttachGlobal), cudaSuccess);
  EXPECT_EQ(used_bytes(), before + kMiB);
  EXPECT_EQ(cudaFree(m), cudaSuccess);

  void* h1 = nullptr;
  void* h2 = nullptr;
  ASSERT_EQ(cudaMallocHost(&h1, kMiB), cudaSuccess);
  ASSERT_EQ(cudaHostAlloc(&h2, kMiB, cudaHostAllocPortable), cudaSuccess);
  EXPECT_EQ(used_bytes(), before);  // pinned host memory is not device memory
  EXPECT_EQ(cudaFree(h1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(h1), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(h2), cudaSuccess);
  cudaGetLastError();
}

TEST(Runtime, AsyncPoolsAndStreams) {
  const size_t before = used_bytes();
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  void* a = nullptr;
  ASSERT_EQ(cudaMallocAsync(&a, kMiB, s), cudaSuccess);
  void* b = nullptr;
  ASSERT_EQ(cudaMallocAsync_ptsz(&b, kMiB, s), cudaSuccess);

  cudaMemPool_t def = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&def, 0), cudaSuccess);
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  void* c = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&c, kMiB, pool, s), cudaSuccess);
  void* e = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&e, kMiB, def, s), cudaSuccess);
  EXPECT_EQ(used_bytes(), before + 4 * kMiB);

  EXPECT_EQ(cudaFreeAsync(a, s), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync_ptsz(b, s), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(c, s), cudaSuccess);
  EXPECT_EQ(cudaFree(e), cudaSuccess);
  EXPECT_EQ(used_bytes(), before);
  EXPECT_EQ(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(def), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

TEST(Runtime, DevicesVersionsErrors) {
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(n, 1);
  int dev = -1;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  EXPECT_EQ(dev, 0);
  EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(cudaSetDevice(1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  int v = 0;
  ASSERT_EQ(cudaRuntimeGetVersion(&v), cudaSuccess);
  EXPECT_EQ(v, 13000);
  ASSERT_EQ(cudaDriverGetVersion(&v), cudaSuccess);
  EXPECT_EQ(v, 13000);
  EXPECT_STREQ(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");

  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, kMiB), cudaSuccess);
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);  // frees the device's allocations
  EXPECT_EQ(cudaFree(d), cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST(Runtime, ConcurrentAllocFree) {
  const size_t before = used_bytes();
  std::vector<std::thread> threads;
  std::vector<int> failures(16, 0);
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([t, &failures] {
      for (int i = 0; i < 10000; ++i) {
        void* p = nullptr;
        const size_t n = 256 + static_cast<size_t>((i * 37 + t) % 8192);
        if (cudaMalloc(&p, n) != cudaSuccess) {
          ++failures[static_cast<size_t>(t)];
          continue;
        }
        static_cast<unsigned char*>(p)[n - 1] = static_cast<unsigned char>(t);
        if (cudaFree(p) != cudaSuccess) ++failures[static_cast<size_t>(t)];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
  EXPECT_EQ(used_bytes(), before);
}

TEST(EntryPoint, ByVersionGivesWorkingCuMemCreate) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuMemCreate", &fn, 12000, 0, &st), cudaSuccess);
  ASSERT_EQ(st, cudaDriverEntryPointSuccess);
  ASSERT_NE(fn, nullptr);
  void* rel = nullptr;
  ASSERT_EQ(cudaGetDriverEntryPoint("cuMemRelease", &rel, cudaEnableDefault, &st), cudaSuccess);
  ASSERT_NE(rel, nullptr);

  const size_t before = used_bytes();
  CUmemAllocationProp prop = device_prop();
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(reinterpret_cast<decltype(&cuMemCreate)>(fn)(&h, 4 * kMiB, &prop, 0), CUDA_SUCCESS);
  EXPECT_NE(h, 0u);
  EXPECT_EQ(used_bytes(), before + 4 * kMiB);
  EXPECT_EQ(reinterpret_cast<decltype(&cuMemRelease)>(rel)(h), CUDA_SUCCESS);
  EXPECT_EQ(used_bytes(), before);
}

TEST(EntryPoint, VersionTooLowAndUnknown) {
  void* fn = reinterpret_cast<void*>(0x1);
  cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSuccess;
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuMemCreate", &fn, 10000, 0, &st), cudaSuccess);
  EXPECT_EQ(fn, nullptr);
  EXPECT_EQ(st, cudaDriverEntryPointVersionNotSufficent);
  fn = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuNoSuchThing", &fn, 13000, 0, &st), cudaSuccess);
  EXPECT_EQ(fn, nullptr);
  EXPECT_EQ(st, cudaDriverEntryPointSymbolNotFound);

  auto gpa = get_proc();
  ASSERT_NE(gpa, nullptr);
  CUdriverProcAddressQueryResult cst = CU_GET_PROC_ADDRESS_SUCCESS;
  fn = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(gpa("cuMemCreate", &fn, 10000, 0, &cst), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(fn, nullptr);
  EXPECT_EQ(cst, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(gpa("cuMemAlloc", &fn, 3010, 0, &cst), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cst, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(gpa("cuMemAlloc_v2", &fn, 13000, 0, &cst), CUDA_ERROR_NOT_FOUND);  // base names only
  EXPECT_EQ(cst, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

TEST(Driver, ProcAddressThroughDlopenIsTheFake) {
  void* h = driver_handle();
  ASSERT_NE(h, nullptr) << dlerror();
  auto gpa = get_proc();
  ASSERT_NE(gpa, nullptr);
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(gpa), &info), 0);
  EXPECT_NE(std::string(info.dli_fname).find("tests/fakecuda"), std::string::npos)
      << info.dli_fname;
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&cudaMalloc), &info), 0);  // not a system libcudart
  EXPECT_NE(std::string(info.dli_fname).find("tests/fakecuda"), std::string::npos)
      << info.dli_fname;

  struct Case {
    const char* base;
    const char* versioned;
    int version;
    cuuint64_t flags;
  };
  const Case cases[] = {
      {"cuMemAlloc", "cuMemAlloc_v2", 13000, 0},
      {"cuMemFree", "cuMemFree_v2", 13000, 0},
      {"cuMemGetInfo", "cuMemGetInfo_v2", 13000, 0},
      {"cuMemAllocHost", "cuMemAllocHost_v2", 13000, 0},
      {"cuMemAllocPitch", "cuMemAllocPitch_v2", 13000, 0},
      {"cuDeviceTotalMem", "cuDeviceTotalMem_v2", 13000, 0},
      {"cuGetProcAddress", "cuGetProcAddress_v2", 12000, 0},
      {"cuGetProcAddress", "cuGetProcAddress", 11030, 0},
      {"cuMemCreate", "cuMemCreate", 12000, 0},
      {"cuMemAllocAsync", "cuMemAllocAsync", 13000, 0},
      {"cuMemAllocAsync", "cuMemAllocAsync_ptsz", 13000,
       CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"cuMemFreeAsync", "cuMemFreeAsync_ptsz", 13000,
       CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", 13000,
       CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"cuMemAlloc", "cuMemAlloc_v2", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
  };
  for (const Case& c : cases) {
    void* fn = resolve<void*>(c.base, c.version, c.flags);
    EXPECT_EQ(fn, dlsym(h, c.versioned)) << c.base << " -> " << c.versioned;
  }

  auto v1 = reinterpret_cast<decltype(&cuGetProcAddress)>(dlsym(h, "cuGetProcAddress"));
  void* fn = nullptr;
  EXPECT_EQ(v1("cuMemFree", &fn, 13000, 0), CUDA_SUCCESS);
  EXPECT_EQ(fn, dlsym(h, "cuMemFree_v2"));

  auto alloc = resolve<decltype(&cuMemAlloc_v2)>("cuMemAlloc");
  auto free_fn = resolve<decltype(&cuMemFree_v2)>("cuMemFree");
  CUdeviceptr p = 0;
  ASSERT_EQ(alloc(&p, 4096), CUDA_SUCCESS);
  EXPECT_EQ(free_fn(p), CUDA_SUCCESS);
  EXPECT_EQ(free_fn(p), CUDA_ERROR_INVALID_VALUE);

  auto export_table = reinterpret_cast<decltype(&cuGetExportTable)>(dlsym(h, "cuGetExportTable"));
  const void* table = nullptr;
  CUuuid id{};
  EXPECT_EQ(export_table(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
}

TEST(Driver, VirtualMemoryManagement) {
  auto reserve = resolve<decltype(&cuMemAddressReserve)>("cuMemAddressReserve");
  auto address_free = resolve<decltype(&cuMemAddressFree)>("cuMemAddressFree");
  auto create = resolve<decltype(&cuMemCreate)>("cuMemCreate");
  auto release = resolve<decltype(&cuMemRelease)>("cuMemRelease");
  auto map = resolve<decltype(&cuMemMap)>("cuMemMap");
  auto unmap = resolve<decltype(&cuMemUnmap)>("cuMemUnmap");
  auto set_access = resolve<decltype(&cuMemSetAccess)>("cuMemSetAccess");
  auto granularity =
      resolve<decltype(&cuMemGetAllocationGranularity)>("cuMemGetAllocationGranularity");

  CUmemAllocationProp prop = device_prop();
  size_t gran = 0;
  ASSERT_EQ(granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), CUDA_SUCCESS);
  ASSERT_EQ(gran, 2 * kMiB);

  const size_t before = used_bytes();
  CUdeviceptr va = 0;
  ASSERT_EQ(reserve(&va, 8 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(va % gran, 0u);
  EXPECT_EQ(used_bytes(), before);  // reservations are not memory

  CUmemGenericAllocationHandle h = 0;
  EXPECT_EQ(create(&h, kMiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);  // not a granularity multiple
  ASSERT_EQ(create(&h, 4 * kMiB, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(used_bytes(), before + 4 * kMiB);

  EXPECT_EQ(map(va, 4 * kMiB, 0, h + 1000, 0), CUDA_ERROR_INVALID_VALUE);  // unknown handle
  EXPECT_EQ(map(va, 8 * kMiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);         // larger than handle
  ASSERT_EQ(map(va, 4 * kMiB, 0, h, 0), CUDA_SUCCESS);
  EXPECT_EQ(map(va + 2 * kMiB, 2 * kMiB, 0, h, 0), CUDA_ERROR_ALREADY_MAPPED);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(set_access(va, 4 * kMiB, &access, 1), CUDA_SUCCESS);
  EXPECT_EQ(set_access(va, 8 * kMiB, &access, 1), CUDA_ERROR_INVALID_VALUE);  // half unmapped

  auto* bytes = reinterpret_cast<unsigned char*>(va);
  bytes[0] = 1;
  bytes[4 * kMiB - 1] = 2;
  EXPECT_EQ(bytes[0] + bytes[4 * kMiB - 1], 3);

  EXPECT_EQ(address_free(va, 8 * kMiB), CUDA_ERROR_INVALID_VALUE);  // still mapped
  EXPECT_EQ(unmap(va, 4 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(unmap(va, 4 * kMiB), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(release(h), CUDA_SUCCESS);
  EXPECT_EQ(release(h), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(used_bytes(), before);
  EXPECT_EQ(address_free(va, 4 * kMiB), CUDA_ERROR_INVALID_VALUE);  // wrong size
  EXPECT_EQ(address_free(va, 8 * kMiB), CUDA_SUCCESS);
}

// ctest entry fakecuda_selftest_oom: FAKECUDA_OOM_AFTER=10485760,
// FAKECUDA_TOTAL_MEM=1073741824, FAKECUDA_DEVICES=2.
TEST(EnvOom, AllocationsBeyondLimitFail) {
  if (std::getenv("FAKECUDA_OOM_AFTER") == nullptr) GTEST_SKIP() << "needs FAKECUDA_OOM_AFTER";
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(n, 2);
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  EXPECT_EQ(total, kGiB);

  void* a = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 8 * kMiB), cudaSuccess);
  void* b = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(cudaMalloc(&b, 4 * kMiB), cudaErrorMemoryAllocation);
  EXPECT_EQ(b, reinterpret_cast<void*>(0x1));  // untouched on failure
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaMallocManaged(&b, 4 * kMiB, cudaMemAttachGlobal), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaMallocAsync(&b, 4 * kMiB, nullptr), cudaErrorMemoryAllocation);

  // The limit counts all devices together.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&b, 4 * kMiB), cudaErrorMemoryAllocation);
  auto create = resolve<decltype(&cuMemCreate)>("cuMemCreate");
  CUmemAllocationProp prop = device_prop(1);
  CUmemGenericAllocationHandle h = 0;
  EXPECT_EQ(create(&h, 4 * kMiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(create(&h, 2 * kMiB, &prop, 0), CUDA_SUCCESS);  // exactly at the limit
  EXPECT_EQ(used_bytes(), 2 * kMiB);
  EXPECT_EQ(resolve<decltype(&cuMemRelease)>("cuMemRelease")(h), CUDA_SUCCESS);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);

  // Pinned host memory does not count.
  void* host = nullptr;
  ASSERT_EQ(cudaMallocHost(&host, 64 * kMiB), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(host), cudaSuccess);

  EXPECT_EQ(cudaFree(a), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 10 * kMiB), cudaSuccess);
  EXPECT_EQ(cudaFree(b), cudaSuccess);
}

// ctest entry fakecuda_selftest_fail:
// FAKECUDA_FAIL=cuMemAlloc_v2:2,cudaMallocManaged,cudaMallocHost:1.
TEST(EnvFail, NamedCallsFail) {
  if (std::getenv("FAKECUDA_FAIL") == nullptr) GTEST_SKIP() << "needs FAKECUDA_FAIL";
  void* a = nullptr;
  void* b = reinterpret_cast<void*>(0x1);
  void* c = nullptr;
  ASSERT_EQ(cudaMalloc(&a, kMiB), cudaSuccess);                // cuMemAlloc_v2 call 1
  EXPECT_EQ(cudaMalloc(&b, kMiB), cudaErrorMemoryAllocation);  // call 2 fails
  EXPECT_EQ(b, reinterpret_cast<void*>(0x1));
  ASSERT_EQ(cudaMalloc(&c, kMiB), cudaSuccess);  // call 3
  EXPECT_EQ(cudaMallocManaged(&b, kMiB, cudaMemAttachGlobal), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaMallocManaged(&b, kMiB, cudaMemAttachGlobal), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaMallocHost(&b, kMiB), cudaErrorMemoryAllocation);
  ASSERT_EQ(cudaMallocHost(&b, kMiB), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(b), cudaSuccess);
  EXPECT_EQ(cudaFree(a), cudaSuccess);
  EXPECT_EQ(cudaFree(c), cudaSuccess);
}

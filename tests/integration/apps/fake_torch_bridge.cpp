// A stand-in for libgpumemshim_torch.so in CI (no torch there): the same two exported functions,
// so the Python package's automatic attach is driven end to end. Attaching reports one segment
// and one tensor block through the shim's gpumemshim_torch_event, like the real bridge's tracker.
// fake_backward_alloc plays autograd's device thread: a native thread (no Python frames) that
// allocates with cudaMalloc while the Python caller waits inside backward(); with
// FAKE_LIBRARY_MEMORY=1 its first pass also makes what a real first matmul in backward makes: a
// cuBLAS handle (the fake libcublas.so.13) and PyTorch's cuBLASLt workspace (fake
// libtorch_cuda.so).
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <thread>

extern "C" {
struct FakeCublasContext;
int cublasCreate_v2(FakeCublasContext** handle);
}
namespace at::cuda {
void* getCUDABlasLtWorkspace(const char* grad_fn);
}

using TorchEventFn = void (*)(int, int, uint64_t, uint64_t, uint64_t);
using CudaMallocFn = int (*)(void**, size_t);

extern "C" __attribute__((visibility("default"))) const char* gpumemshim_torch_version(void) {
  const char* v = std::getenv("FAKE_BRIDGE_TORCH_VERSION");
  return v ? v : "0.0.0+fake";
}

static bool g_attached = false;  // like the real bridge: events only once attached

extern "C" __attribute__((visibility("default"))) int gpumemshim_torch_attach(void) {
  auto fn = reinterpret_cast<TorchEventFn>(dlsym(RTLD_DEFAULT, "gpumemshim_torch_event"));
  if (!fn || std::getenv("FAKE_BRIDGE_DECLINE")) return 0;
  g_attached = true;
  fn(4, 0, 0x7f0000000000ull, 2u << 20, 0);  // segment_alloc
  fn(1, 0, 0x7f0000000000ull, 512, 0);       // alloc
  return 1;
}

using GradFnEventFn = void (*)(int, int, uint64_t, uint64_t, uint64_t, const char*);

__attribute__((noinline)) static void autograd_thread_alloc(size_t bytes) {
  auto cuda_malloc = reinterpret_cast<CudaMallocFn>(dlsym(RTLD_DEFAULT, "cudaMalloc"));
  void* p = nullptr;
  if (cuda_malloc) cuda_malloc(&p, bytes);  // kept: a leak made on the "autograd thread"
  // And a tensor block as the real bridge reports one while a Node runs: with its type name.
  static uint64_t next_block = 0x7f0000400000ull;
  auto with_grad_fn =
      reinterpret_cast<GradFnEventFn>(dlsym(RTLD_DEFAULT, "gpumemshim_torch_event_grad_fn"));
  if (with_grad_fn && g_attached) {
    with_grad_fn(1, 0, next_block, 8192, 0, "N5torch8autograd9generated11MmBackward0E");
    next_block += 8192;
  }
  static std::once_flag first_matmul;
  if (std::getenv("FAKE_LIBRARY_MEMORY") && g_attached)
    std::call_once(first_matmul, [] {
      FakeCublasContext* handle = nullptr;
      cublasCreate_v2(&handle);
      at::cuda::getCUDABlasLtWorkspace("N5torch8autograd9generated11MmBackward0E");
    });
}

extern "C" __attribute__((visibility("default"))) void fake_backward_alloc(size_t bytes) {
  std::thread t(autograd_thread_alloc, bytes);
  t.join();
}

// A tensor block allocated and freed again, as the caching allocator reports one (the optimizer
// step's temporaries in the tests).
extern "C" __attribute__((visibility("default"))) void fake_torch_block(size_t bytes) {
  auto fn = reinterpret_cast<TorchEventFn>(dlsym(RTLD_DEFAULT, "gpumemshim_torch_event"));
  if (!fn) return;
  constexpr uint64_t kBlock = 0x7f0000200000ull;
  fn(1, 0, kBlock, bytes, 0);  // alloc
  fn(2, 0, kBlock, bytes, 0);  // free_requested
  fn(3, 0, kBlock, bytes, 0);  // free_completed
}

// A tensor block handed out and kept, and its release (the categories tests' tensors).
extern "C" __attribute__((visibility("default"))) void fake_torch_alloc(uint64_t address,
                                                                        size_t bytes) {
  auto fn = reinterpret_cast<TorchEventFn>(dlsym(RTLD_DEFAULT, "gpumemshim_torch_event"));
  if (fn) fn(1, 0, address, bytes, 0);
}

extern "C" __attribute__((visibility("default"))) void fake_torch_free(uint64_t address) {
  auto fn = reinterpret_cast<TorchEventFn>(dlsym(RTLD_DEFAULT, "gpumemshim_torch_event"));
  if (!fn) return;
  fn(2, 0, address, 0, 0);
  fn(3, 0, address, 0, 0);
}

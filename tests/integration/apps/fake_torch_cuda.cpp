// A stand-in for the part of libtorch_cuda.so that makes PyTorch's cuBLASLt workspace: a block of
// the caching allocator kept for the process, reported to the shim as the torch bridge reports a
// block of the workspace's size (gpumemshim_torch_event_walk: its native stack walked).
#include <dlfcn.h>

#include <cstdint>

namespace at::cuda {

using WalkFn = void (*)(int, int, uint64_t, uint64_t, uint64_t, const char*);

// grad_fn: the Node autograd runs on this thread (its type name), or null.
__attribute__((visibility("default"), noinline)) void* getCUDABlasLtWorkspace(const char* grad_fn) {
  static uint64_t next = 0x7f0010000000ull;
  constexpr uint64_t kWorkspace = 32ull << 20;
  auto walk = reinterpret_cast<WalkFn>(dlsym(RTLD_DEFAULT, "gpumemshim_torch_event_walk"));
  uint64_t block = next;
  next += kWorkspace;
  if (walk) {
    walk(4, 0, block, kWorkspace, 0, nullptr);  // its segment
    walk(1, 0, block, kWorkspace, 0, grad_fn);  // the block
  }
  return reinterpret_cast<void*>(block);
}

}  // namespace at::cuda

// A stand-in for NCCL, built as libnccl.so.2: at communicator init it allocates its own buffers and
// keeps them until the communicator is destroyed (real NCCL maps them with cuMem* VMM; what the
// analyzer looks at is that the allocating code is in libnccl).
#include <fakecuda/cuda_runtime_api.h>

#include <vector>

namespace {
std::vector<void*> g_buffers;
}

extern "C" __attribute__((visibility("default"), noinline)) int fakeNcclCommInit(int channels) {
  for (int i = 0; i < channels; ++i) {
    void* p = nullptr;
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return 1;  // one channel's buffer
    g_buffers.push_back(p);
  }
  return 0;
}

extern "C" __attribute__((visibility("default"))) void fakeNcclCommDestroy() {
  for (void* p : g_buffers) cudaFree(p);
  g_buffers.clear();
}

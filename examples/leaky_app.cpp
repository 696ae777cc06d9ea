// The demo: a small "training loop" that forgets to free a scratch buffer every few steps.
// Builds against the real CUDA runtime (nvcc -x cu) or the project's fake one (no GPU).
#include <cuda_runtime_api.h>

#include <cstdio>

namespace {

constexpr size_t kMiB = 1 << 20;

void* device_buffer(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) std::fprintf(stderr, "cudaMalloc failed\n");
  return p;
}

void train_step(int step, void* weights) {
  void* activations = device_buffer(32 * kMiB);
  void* scratch = device_buffer(4 * kMiB);  // leaked on every 10th step
  cudaMemset(activations, 0, 32 * kMiB);
  (void)weights;
  cudaFree(activations);
  if (step % 10 != 0) cudaFree(scratch);
}

}  // namespace

int main() {
  void* weights = device_buffer(64 * kMiB);
  for (int step = 1; step <= 50; ++step) train_step(step, weights);
  cudaFree(weights);
  std::printf("trained 50 steps\n");
  return 0;
}

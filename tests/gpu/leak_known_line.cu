// H200 scenario: a CUDA program built by nvcc (static cudart by default, or --cudart shared) that
// leaks 3 × 16 MiB at a known line, or runs clean with "clean". Its output must not change under
// the shim.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

__global__ void fill(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = static_cast<float>(i);
}

static float* make_buffer(size_t bytes) {
  float* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;  // site: make_buffer
  return p;
}

int main(int argc, char** argv) {
  bool leak = !(argc > 1 && std::strcmp(argv[1], "clean") == 0);
  const size_t bytes = 16u << 20;
  double checksum = 0;
  for (int step = 0; step < 10; ++step) {
    float* p = make_buffer(bytes);
    fill<<<(bytes / 4 + 255) / 256, 256>>>(p, static_cast<int>(bytes / 4));
    float v = 0;
    cudaMemcpy(&v, p + 12345, sizeof v, cudaMemcpyDeviceToHost);
    checksum += v;
    bool keep = leak && step % 4 == 1;  // steps 1, 5, 9: three leaked buffers
    if (!keep) cudaFree(p);
  }
  void* pinned = nullptr;
  cudaMallocHost(&pinned, 1 << 20);
  cudaFreeHost(pinned);
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  std::printf("checksum=%.1f total_gib=%zu\n", checksum, total_b >> 30);
  return 0;
}

// H200 overhead benchmark: N cudaMalloc+cudaFree pairs of a given size from a given stack depth,
// timed inside the process (start-up excluded). Prints ns per pair.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

static double pairs(long n, size_t bytes);
static double (*volatile recurse)(int, long, size_t);

static double at_depth(int depth, long n, size_t bytes) {
  if (depth > 1) return recurse(depth - 1, n, bytes) + 0.0;
  return pairs(n, bytes);
}

static double pairs(long n, size_t bytes) {
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    void* p = nullptr;
    cudaMalloc(&p, bytes);
    cudaFree(p);
  }
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
}

int main(int argc, char** argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 2000;
  size_t bytes = argc > 2 ? std::atol(argv[2]) : (1 << 20);
  int depth = argc > 3 ? std::atoi(argv[3]) : 1;
  recurse = at_depth;
  cudaFree(nullptr);  // context creation outside the timing
  pairs(100, bytes);  // warm-up
  std::printf("%.0f\n", at_depth(depth, n, bytes));
  return 0;
}

// N cudaMalloc+cudaFree pairs from a chosen stack depth; for instruction counting under callgrind
// (bench/hook_instructions.sh), where differences between two N cancel start-up costs.
#include <fakecuda/cuda_runtime_api.h>

#include <cstdlib>

namespace {
int pairs_at_depth(int depth, long n);
// Calls through a volatile pointer cannot be turned into a loop: each level is a real frame.
int (*volatile recurse)(int, long) = pairs_at_depth;

__attribute__((noinline)) int pairs_at_depth(int depth, long n) {
  if (depth > 1) return recurse(depth - 1, n) + 1;
  for (long i = 0; i < n; ++i) {
    void* p = nullptr;
    cudaMalloc(&p, 4096);
    cudaFree(p);
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 1000;
  int depth = argc > 2 ? std::atoi(argv[2]) : 1;
  return pairs_at_depth(depth, n) > 1000 ? 1 : 0;
}

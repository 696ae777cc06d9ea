// One "rank" of a data-parallel job on the fake CUDA, for the multi-rank report tests. Every rank
// holds the same model and activations; rank 1 also holds an extra buffer (an uneven shard) at its
// peak, and the rank named by LEAK_RANK leaks one buffer. Lines marked "site:" are looked up by the
// tests.
#include <fakecuda/cuda_runtime_api.h>
#include "check_cuda.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr size_t kMiB = 1 << 20;

__attribute__((noinline)) void* model_weights() {
  void* p = nullptr;
  check(cudaMalloc(&p, 4 * kMiB), "cudaMalloc");  // site: weights
  return p;
}

__attribute__((noinline)) void* activations(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");  // site: activations
  return p;
}

__attribute__((noinline)) void* uneven_shard() {
  void* p = nullptr;
  check(cudaMalloc(&p, 3 * kMiB), "cudaMalloc");  // site: uneven shard
  return p;
}

__attribute__((noinline)) void leak_one() {
  void* p = nullptr;
  check(cudaMalloc(&p, 1 * kMiB), "cudaMalloc");  // site: rank leak
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace

int main() {
  const int rank = env_int("RANK", -1);
  const int steps = env_int("STEPS", 3);
  void* weights = model_weights();
  for (int step = 0; step < steps; ++step) {
    std::vector<void*> acts;
    for (int i = 0; i < 4; ++i) acts.push_back(activations(512 * 1024));
    void* extra = rank == 1 ? uneven_shard() : nullptr;
    for (void* p : acts) check(cudaFree(p), "cudaFree");
    if (extra) check(cudaFree(extra), "cudaFree");
  }
  if (rank == env_int("LEAK_RANK", -2)) leak_one();
  check(cudaFree(weights), "cudaFree");
  std::printf("rank %d done\n", rank);
  return 0;
}

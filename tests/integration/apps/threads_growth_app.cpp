// Many threads, no step markers: the growth tests' program (test_growth_windows.py). Each thread
// does PAIRS alloc/free pairs and ends holding one 4 KiB buffer (a leak, made once at its end);
// with KEEP_EVERY > 0 it also keeps one more 4 KiB buffer after every KEEP_EVERY pairs (growth).
//   threads_growth_app THREADS PAIRS [KEEP_EVERY]
#include <fakecuda/cuda_runtime_api.h>
#include "check_cuda.h"

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

__attribute__((noinline)) void* work_buffer() {
  void* p = nullptr;
  check(cudaMalloc(&p, 256), "cudaMalloc");  // site: work_buffer
  return p;
}

__attribute__((noinline)) void* kept_buffer() {
  void* p = nullptr;
  check(cudaMalloc(&p, 4096), "cudaMalloc");  // site: kept_buffer
  return p;
}

__attribute__((noinline)) void* last_buffer() {
  void* p = nullptr;
  check(cudaMalloc(&p, 4096), "cudaMalloc");  // site: last_buffer
  return p;
}

void worker(int pairs, int keep_every) {
  std::vector<void*> kept;
  for (int i = 0; i < pairs; ++i) {
    check(cudaFree(work_buffer()), "cudaFree");
    if (keep_every > 0 && (i + 1) % keep_every == 0) kept.push_back(kept_buffer());
  }
  last_buffer();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: threads_growth_app THREADS PAIRS [KEEP_EVERY]\n");
    return 2;
  }
  const int threads = std::atoi(argv[1]), pairs = std::atoi(argv[2]);
  const int keep_every = argc > 3 ? std::atoi(argv[3]) : 0;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) workers.emplace_back(worker, pairs, keep_every);
  for (std::thread& w : workers) w.join();
  std::printf("done\n");
  return 0;
}

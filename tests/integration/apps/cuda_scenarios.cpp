// A small CUDA program for the integration tests, linked against the fake libcudart.so.13 exactly
// as a real application links the real one. Each scenario exercises one promise of the shim; lines
// marked "site:" are looked up by the tests to check reported file:line.
#include <fakecuda/cuda_runtime_api.h>
#include "check_cuda.h"
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kMiB = 1 << 20;

__attribute__((noinline)) void* make_buffer(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");  // site: make_buffer
  return p;
}

// Balanced work that must never be reported.
void balanced_work() {
  for (int i = 0; i < 10; ++i) {
    void* p = make_buffer(64 * 1024);
    check(cudaFree(p), "cudaFree");
  }
}

__attribute__((noinline)) void leak_three_buffers() {
  for (int i = 0; i < 3; ++i) {
    void* p = nullptr;
    check(cudaMalloc(&p, 1 * kMiB), "cudaMalloc");  // site: planted leak
  }
}

int scenario_leak(bool leak) {
  balanced_work();
  if (leak) leak_three_buffers();
  std::printf("done\n");
  return 0;
}

// pause_us after each pair spreads the pairs over the shim's periodic flushes (several blocks);
// with leak_bytes, each thread ends by allocating that much and keeping it.
int scenario_threads(int threads, int pairs, int pause_us, int leak_bytes) {
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([pairs, t, pause_us, leak_bytes] {
      for (int i = 0; i < pairs; ++i) {
        void* p = nullptr;
        check(cudaMalloc(&p, static_cast<size_t>(256 + t * 16 + (i % 7))), "cudaMalloc");
        check(cudaFree(p), "cudaFree");
        if (pause_us > 0) usleep(static_cast<useconds_t>(pause_us));
      }
      void* kept = nullptr;
      if (leak_bytes > 0) check(cudaMalloc(&kept, static_cast<size_t>(leak_bytes)), "cudaMalloc");
    });
  }
  for (auto& w : workers) w.join();
  std::printf("done\n");
  return 0;
}

// The shape of a PyTorch training process, for the trace benchmarks (bench/real_traces.sh): the
// main thread's forward pass (activations allocated, freed in reverse), an autograd thread's
// backward pass (gradients, short-lived temporaries) working at the same time, and pinned-memory
// loader workers, each filling a host buffer per batch and handing it back.
int scenario_torchlike(int steps, int loaders) {
  constexpr int kLayers = 200;
  std::vector<std::thread> threads;
  threads.emplace_back([steps] {  // the autograd thread
    std::vector<void*> grads(kLayers);
    for (int s = 0; s < steps; ++s)
      for (int l = 0; l < kLayers; ++l) {
        void* tmp = nullptr;
        check(cudaMalloc(&tmp, 4096 + 512 * static_cast<size_t>(l % 9)), "cudaMalloc");
        if (grads[l]) check(cudaFree(grads[l]), "cudaFree");
        check(cudaMalloc(&grads[l], 65536), "cudaMalloc");
        check(cudaFree(tmp), "cudaFree");
      }
    for (void* g : grads) check(cudaFree(g), "cudaFree");
  });
  for (int w = 0; w < loaders; ++w)
    threads.emplace_back([steps] {
      for (int s = 0; s < steps / 4; ++s) {
        void* batch = nullptr;
        check(cudaHostAlloc(&batch, 1 << 20, 0), "cudaHostAlloc");
        check(cudaFreeHost(batch), "cudaFreeHost");
        usleep(50);
      }
    });
  std::vector<void*> acts(kLayers);
  for (int s = 0; s < steps; ++s) {  // the main thread's forward passes
    for (int l = 0; l < kLayers; ++l)
      check(cudaMalloc(&acts[l], 8192 + 1024 * static_cast<size_t>(l % 13)), "cudaMalloc");
    for (int l = kLayers; l-- > 0;) check(cudaFree(acts[l]), "cudaFree");
  }
  for (auto& t : threads) t.join();
  std::printf("done\n");
  return 0;
}

// Run with FAKECUDA_OOM_AFTER: the second big allocation fails and the program prints the code it
// got, so the test can compare it with a run without the shim.
int scenario_oom() {
  void* a = nullptr;
  void* b = nullptr;
  cudaError_t first = cudaMalloc(&a, 8 * kMiB);
  cudaError_t second = cudaMalloc(&b, 64 * kMiB);  // site: oom
  std::printf("first=%d second=%d b=%p\n", static_cast<int>(first), static_cast<int>(second), b);
  if (first == cudaSuccess) cudaFree(a);
  return second == cudaSuccess ? 0 : 4;
}

// Leaks, tells the test it is ready, then waits to be killed.
int scenario_killed() {
  leak_three_buffers();
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) pause();
}

__attribute__((noinline)) void child_leak() {
  void* p = nullptr;
  check(cudaMalloc(&p, 2 * kMiB), "cudaMalloc");  // site: child leak
}

int scenario_fork() {
  leak_three_buffers();
  pid_t pid = fork();
  if (pid == 0) {
    child_leak();
    std::printf("child done\n");
    std::exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::printf("parent done\n");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 5;
}

// The child leaks and ends through _exit, _Exit or quick_exit (no exit handlers, no destructors):
// its trace must still hold its events and an End record.
int scenario_fork_exit(const std::string& how) {
  leak_three_buffers();
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    child_leak();
    std::printf("child done\n");
    std::fflush(stdout);
    if (how == "_Exit") std::_Exit(0);
    if (how == "quick_exit") std::quick_exit(0);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::printf("parent done\n");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 5;
}

// A vfork child shares the parent's memory, trace state included: its _exit must leave the
// parent's trace alone (no End in the middle of it).
int scenario_vfork_exit() {
  leak_three_buffers();
  pid_t pid = vfork();
  if (pid == 0) _exit(3);
  int status = 0;
  waitpid(pid, &status, 0);
  child_leak();
  std::printf("parent done %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}

// Every runtime allocation API once; only the pinned host buffer is left behind.
int scenario_all_apis() {
  void* p = nullptr;
  check(cudaMalloc(&p, 1000), "cudaMalloc");
  check(cudaFree(p), "cudaFree");
  cudaStream_t s = nullptr;
  check(cudaStreamCreate(&s), "cudaStreamCreate");
  check(cudaMallocAsync(&p, 2000, s), "cudaMallocAsync");
  check(cudaFreeAsync(p, s), "cudaFreeAsync");
  cudaMemPool_t pool = nullptr;
  check(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
  check(cudaMallocFromPoolAsync(&p, 3000, pool, s), "cudaMallocFromPoolAsync");
  check(cudaFreeAsync(p, s), "cudaFreeAsync");
  check(cudaMallocManaged(&p, 4000, cudaMemAttachGlobal), "cudaMallocManaged");
  check(cudaFree(p), "cudaFree");
  size_t pitch = 0;
  check(cudaMallocPitch(&p, &pitch, 100, 10), "cudaMallocPitch");
  check(cudaFree(p), "cudaFree");
  cudaPitchedPtr pp{};
  check(cudaMalloc3D(&pp, cudaExtent{100, 10, 3}), "cudaMalloc3D");
  check(cudaFree(pp.ptr), "cudaFree");
  check(cudaHostAlloc(&p, 5000, cudaHostAllocDefault), "cudaHostAlloc");
  check(cudaFreeHost(p), "cudaFreeHost");
  void* pinned = nullptr;
  check(cudaMallocHost(&pinned, 6000), "cudaMallocHost");  // site: pinned leak
  size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  check(cudaStreamDestroy(s), "cudaStreamDestroy");
  std::printf("pitch=%zu pitch3d=%zu total=%zu\n", pitch, pp.pitch, total);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string s = argc > 1 ? argv[1] : "";
  if (s == "leak") return scenario_leak(true);
  if (s == "clean") return scenario_leak(false);
  if (s == "threads")
    return scenario_threads(argc > 2 ? std::atoi(argv[2]) : 16,
                            argc > 3 ? std::atoi(argv[3]) : 10000,
                            argc > 4 ? std::atoi(argv[4]) : 0, argc > 5 ? std::atoi(argv[5]) : 0);
  if (s == "torchlike")
    return scenario_torchlike(argc > 2 ? std::atoi(argv[2]) : 1000,
                              argc > 3 ? std::atoi(argv[3]) : 4);
  if (s == "oom") return scenario_oom();
  if (s == "killed") return scenario_killed();
  if (s == "fork") return scenario_fork();
  if (s == "all-apis") return scenario_all_apis();
  if (s == "fork-exit") return scenario_fork_exit(argc > 2 ? argv[2] : "_exit");
  if (s == "vfork-exit") return scenario_vfork_exit();
  std::fprintf(stderr,
               "usage: cuda_scenarios leak|clean|threads N M [PAUSE_US LEAK_BYTES]|torchlike STEPS "
               "LOADERS|oom|killed|fork|all-apis|fork-exit HOW|vfork-exit\n");
  return 2;
}

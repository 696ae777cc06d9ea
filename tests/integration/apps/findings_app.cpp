// Scenarios for the analyzer's findings, on the fake CUDA under the shim. Step
// markers and expect_no_leak regions go through the shim's marker C API, torch allocator events
// through gpumemshim_torch_event, both found with dlsym like the Python package and the torch
// bridge do. Lines marked "site:" are looked up by tests/integration/test_findings.py.
//
//   findings_app growth N | steady N | retained N | region N | peak N | timegrowth N | frag |
//                capped | cache
//   findings_app MODE N PAUSE_US   the step modes, pausing after each step (the shim's periodic
//                                  flushes then cut the trace into several blocks)
#include <dlfcn.h>
#include <fakecuda/cuda_runtime_api.h>
#include "check_cuda.h"
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using NameFn = void (*)(const char*);
using TorchEventFn = void (*)(int action, int device, uint64_t address, uint64_t size, uint64_t stream);

NameFn step_fn, region_begin_fn, region_end_fn;
TorchEventFn torch_fn;
void (*attribute_fn)(const char*, const char*);

void* cuda_alloc(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}

// Model weights: made before the first step, kept to the end.
__attribute__((noinline)) void* load_weights() {
  void* p = nullptr;
  check(cudaMalloc(&p, 1 << 20), "cudaMalloc");  // site: weights
  return p;
}

// The per-step leak: 4096 bytes kept every step.
__attribute__((noinline)) void* keep_history() {
  void* p = nullptr;
  check(cudaMalloc(&p, 4096), "cudaMalloc");  // site: step_leak
  return p;
}

// The last step's output, alive at exit: one step's worth, not accumulating.
__attribute__((noinline)) void* last_output() {
  void* p = nullptr;
  check(cudaMalloc(&p, 8192), "cudaMalloc");  // site: last_output
  return p;
}

__attribute__((noinline)) void* evaluate_and_forget() {
  void* p = nullptr;
  check(cudaMalloc(&p, 16384), "cudaMalloc");  // site: region_leak
  return p;
}

// Activations and temporaries of one step: all freed before the step ends.
void step_work() {
  void* a = cuda_alloc(1 << 20);
  void* b = cuda_alloc(64 << 10);
  check(cudaFree(b), "cudaFree");
  check(cudaFree(a), "cudaFree");
}

void device_total() {
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
}

int train(const char* mode, int steps, int pause_us) {
  device_total();
  void* weights = load_weights();
  std::vector<void*> history;
  for (int i = 0; i < steps; ++i) {
    step_work();
    if (!std::strcmp(mode, "growth")) history.push_back(keep_history());
    if (!std::strcmp(mode, "retained") && i == steps - 1) history.push_back(last_output());
    if (!std::strcmp(mode, "peak")) {  // 14 MiB of activations: run with FAKECUDA_TOTAL_MEM=16 MiB
      void* activations = cuda_alloc(14 << 20);
      check(cudaFree(activations), "cudaFree");
    }
    step_fn(nullptr);
    if (pause_us > 0) usleep(static_cast<useconds_t>(pause_us));
  }
  if (!std::strcmp(mode, "region")) {
    region_begin_fn("eval");
    step_work();
    history.push_back(evaluate_and_forget());
    region_end_fn("eval");
  }
  (void)weights;  // kept: the trace ends with it alive
  return 0;
}

// No step markers: a leak that grows with the program's allocations (paused between them).
int time_growth(int iterations) {
  device_total();
  for (int i = 0; i < iterations; ++i) {
    keep_history();
    usleep(2000);
  }
  return 0;
}

// PyTorch's caching allocator, played: one 20 MiB segment filled with ten 2 MiB blocks, every
// other one freed (five 2 MiB holes, 10 MiB free in the cache), then a 4 MiB request fails: the
// device has only 1 MiB free, and no hole is big enough although the total is.
constexpr uint64_t kSeg = 0x7f0000000000ull, kStream = 0x77, kMiB = 1 << 20;

__attribute__((noinline)) void torch_oom() {
  torch_fn(8, 0, 1 * kMiB, 4 * kMiB, kStream);  // site: torch_oom
}

// The same allocator under the process's own cap, as the Python package records
// torch.cuda.set_per_process_memory_fraction(0.5): on a 64 MiB device (FAKECUDA_TOTAL_MEM) the
// cap is 32 MiB; a full 30 MiB segment leaves no room under it for the next segment, while the
// device still has 30 MiB free.
__attribute__((noinline)) void capped_oom() {
  torch_fn(8, 0, 30 * kMiB, 4 * kMiB, kStream);  // site: capped_oom
}

int capped() {
  attribute_fn("torch.memory_fraction.0", "0.5");
  device_total();
  void* segment_backing = cuda_alloc(30 * kMiB);
  torch_fn(4, 0, kSeg, 30 * kMiB, kStream);  // segment_alloc
  for (uint64_t i = 0; i < 15; ++i) torch_fn(1, 0, kSeg + i * 2 * kMiB, 2 * kMiB, kStream);
  capped_oom();
  (void)segment_backing;
  return 0;
}

int fragmentation() {
  device_total();
  void* segment_backing = cuda_alloc(20 * kMiB);  // the segment's cudaMalloc
  torch_fn(4, 0, kSeg, 20 * kMiB, kStream);  // segment_alloc
  for (uint64_t i = 0; i < 10; ++i) torch_fn(1, 0, kSeg + i * 2 * kMiB, 2 * kMiB, kStream);
  for (uint64_t i = 0; i < 10; i += 2) {
    torch_fn(2, 0, kSeg + i * 2 * kMiB, 2 * kMiB, kStream);
    torch_fn(3, 0, kSeg + i * 2 * kMiB, 2 * kMiB, kStream);
  }
  torch_oom();
  (void)segment_backing;
  return 0;
}

// The cache at the end: a 128 MiB segment whose blocks were all given back to the allocator.
int cache() {
  device_total();
  void* segment_backing = cuda_alloc(128 * kMiB);
  torch_fn(4, 0, kSeg, 128 * kMiB, kStream);
  for (uint64_t i = 0; i < 4; ++i) torch_fn(1, 0, kSeg + i * 32 * kMiB, 32 * kMiB, kStream);
  for (uint64_t i = 0; i < 4; ++i) torch_fn(3, 0, kSeg + i * 32 * kMiB, 32 * kMiB, kStream);
  (void)segment_backing;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  step_fn = reinterpret_cast<NameFn>(dlsym(RTLD_DEFAULT, "gpumemshim_step"));
  region_begin_fn = reinterpret_cast<NameFn>(dlsym(RTLD_DEFAULT, "gpumemshim_region_begin"));
  region_end_fn = reinterpret_cast<NameFn>(dlsym(RTLD_DEFAULT, "gpumemshim_region_end"));
  torch_fn = reinterpret_cast<TorchEventFn>(dlsym(RTLD_DEFAULT, "gpumemshim_torch_event"));
  attribute_fn =
      reinterpret_cast<decltype(attribute_fn)>(dlsym(RTLD_DEFAULT, "gpumemshim_attribute"));
  if (!step_fn || !region_begin_fn || !region_end_fn || !torch_fn || !attribute_fn) {
    std::puts("no shim");
    return 4;
  }
  if (argc < 2) {
    std::fprintf(stderr, "usage: findings_app MODE [N]\n");
    return 2;
  }
  const char* mode = argv[1];
  int n = argc > 2 ? std::atoi(argv[2]) : 30;
  if (!std::strcmp(mode, "frag")) return fragmentation();
  if (!std::strcmp(mode, "capped")) return capped();
  if (!std::strcmp(mode, "cache")) return cache();
  if (!std::strcmp(mode, "timegrowth")) return time_growth(n);
  return train(mode, n, argc > 3 ? std::atoi(argv[3]) : 0);
}

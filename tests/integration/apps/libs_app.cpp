// A program over the fake cuBLAS (libcublas.so.13), as a no-step benchmark or a training loop is:
// each of two threads makes its cuBLAS handle (the library's own memory, kept for the process) and
// runs GEMMs (whose temporaries cuBLAS frees). The report must keep cuBLAS's memory apart from the
// script's: with `leak` the main thread also keeps a buffer of its own every iteration. Lines
// marked "site:" are looked up.
//   libs_app clean|leak [steps]
#include <dlfcn.h>
#include <fakecuda/cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <thread>

extern "C" {
struct FakeCublasContext;
int cublasCreate_v2(FakeCublasContext** handle);
int cublasSgemm_v2(FakeCublasContext* handle, int n);
}

namespace {

using StepFn = void (*)(const char*);

// One worker's benchmark: its handle, made at its first GEMM, then GEMMs.
__attribute__((noinline)) int benchmark(int iterations, StepFn step, bool leak) {
  FakeCublasContext* handle = nullptr;
  if (cublasCreate_v2(&handle) != 0) return 1;  // site: create_handle
  for (int i = 0; i < iterations; ++i) {
    if (cublasSgemm_v2(handle, 64) != 0) return 1;
    void* mine = nullptr;
    if (leak && cudaMalloc(&mine, 2048) != cudaSuccess) return 1;  // site: script_leak
    if (step) step(nullptr);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: libs_app clean|leak [steps]\n");
    return 2;
  }
  auto step = reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "gpumemshim_step"));
  const bool steps = argc > 2 && !std::strcmp(argv[2], "steps");
  if (steps && step) step(nullptr);  // the handles come after the first step
  const bool leak = !std::strcmp(argv[1], "leak");
  int worker_rc = 0;
  std::thread worker([&] { worker_rc = benchmark(4, nullptr, false); });
  int rc = benchmark(4, steps ? step : nullptr, leak);
  worker.join();
  rc |= worker_rc;
  std::puts(rc ? "failed" : "ok");
  return rc;
}

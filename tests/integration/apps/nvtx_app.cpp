// A CUDA program annotated with header-only NVTX v3, as PyTorch ≥ 2.5 and most CUDA code are: NVTX
// loads the library named by NVTX_INJECTION64_PATH at the first call. Under the shim that is the
// shim itself, which records the ranges and marks as Marker records.
//   nvtx_app [iterations]   each: push "forward", cudaMalloc, pop; push "backward" (Ex API),
//                           cudaFree, pop; mark "checkpoint"; then one wide mark "done".
//   nvtx_app N steps        each iteration inside a range "Step <i>" that also keeps 4096 bytes
//   nvtx_app N steps+api    ... and calls gpumemshim_step() after each iteration from i == 2 on
#include <fakecuda/cuda_runtime_api.h>
#include "check_cuda.h"
#include <nvtx3/nvToolsExt.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int push_ex(const char* name) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  return nvtxRangePushEx(&a);
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = argc > 1 ? std::atoi(argv[1]) : 3;
  const char* mode = argc > 2 ? argv[2] : "";
  bool steps = std::strncmp(mode, "steps", 5) == 0;
  using StepFn = void (*)(const char*);
  auto api_step = std::strcmp(mode, "steps+api") == 0
                      ? reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "gpumemshim_step"))
                      : nullptr;
  std::vector<void*> kept;
  for (int i = 0; i < iterations; ++i) {
    if (steps) nvtxRangePushA(("Step " + std::to_string(i)).c_str());
    if (steps) {
      void* k = nullptr;
      check(cudaMalloc(&k, 4096), "cudaMalloc");  // site: nvtx_step_leak
      kept.push_back(k);
    }
    void* p = nullptr;
    int depth = nvtxRangePushA("forward");
    check(cudaMalloc(&p, 1 << 20), "cudaMalloc");
    int popped = nvtxRangePop();
    push_ex("backward");
    check(cudaFree(p), "cudaFree");
    nvtxRangePop();
    nvtxMarkA("checkpoint");
    if (steps) nvtxRangePop();
    if (api_step && i >= 2) api_step(nullptr);
    // Under an injection that keeps depth, push returns 0 and pop the depth ended (0); with no
    // tool NVTX returns its no-op values. Either way the program runs on.
    std::printf("iteration %d depth %d popped %d\n", i, depth, popped);
  }
  if (std::strcmp(mode, "long") == 0) nvtxMarkA(std::string(3000, 'n').c_str());  // cut to 1024
  nvtxMarkW(L"done");
  std::printf("done\n");
  return 0;
}

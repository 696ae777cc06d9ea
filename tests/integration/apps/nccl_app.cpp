// A data-parallel training loop over the fake NCCL: the communicator's buffers live to the end
// (never destroyed, as in many scripts), the script itself leaks one buffer per step. The report
// must keep NCCL's memory apart from the script's leak. Lines marked "site:" are looked up.
#include <dlfcn.h>
#include <fakecuda/cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" int fakeNcclCommInit(int channels);

int main(int argc, char** argv) {
  using StepFn = void (*)(const char*);
  auto step = reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "gpumemshim_step"));
  bool steps = argc > 1 && argv[1][0] == 's';
  if (fakeNcclCommInit(4) != 0) return 3;  // site: comm_init
  std::vector<void*> kept;
  for (int i = 0; i < 5; ++i) {
    void* p = nullptr;
    if (cudaMalloc(&p, 4096) != cudaSuccess) return 3;  // site: script_leak
    kept.push_back(p);
    if (steps && step) step(nullptr);
  }
  std::puts("ok");
  return 0;
}

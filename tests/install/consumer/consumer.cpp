// Three training steps, each marked, on the CUDA runtime named by argv[1]; step 2 forgets to free
// its buffer inside an expect_no_leak region. Without the shim the markers do nothing.
#include <dlfcn.h>
#include <gpumemshim/markers.h>

#include <cstddef>
#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer LIBCUDART\n");
    return 2;
  }
  void* cudart = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (!cudart) {
    std::fprintf(stderr, "consumer: %s\n", dlerror());
    return 2;
  }
  using Malloc = int (*)(void**, std::size_t);
  using Free = int (*)(void*);
  auto cuda_malloc = reinterpret_cast<Malloc>(dlsym(cudart, "cudaMalloc"));
  auto cuda_free = reinterpret_cast<Free>(dlsym(cudart, "cudaFree"));
  if (!cuda_malloc || !cuda_free) return 2;
  std::printf("shim active: %d\n", gpumemshim::active() ? 1 : 0);
  for (int step = 1; step <= 3; ++step) {
    void* p = nullptr;
    gpumemshim::ExpectNoLeak region("consumer-step");
    if (cuda_malloc(&p, std::size_t{1} << 20) != 0) return 1;
    if (step != 2) cuda_free(p);
    gpumemshim::step("consumer.step");
  }
  gpumemshim::mark("consumer.done");
  return 0;
}

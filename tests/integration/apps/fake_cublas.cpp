// A stand-in for cuBLAS, built as libcublas.so.13: a handle's creation allocates device memory the
// library keeps until cublasDestroy (real cuBLAS does so through the driver), and a GEMM allocates
// a temporary workspace that it frees before returning. What the analyzer looks at is the frame
// named cublasCreate_v2 above the allocation.
#include <fakecuda/cuda.h>
#include <fakecuda/cuda_runtime_api.h>

#include <cstdint>

extern "C" {

struct FakeCublasContext {
  CUdeviceptr workspace = 0;
};
using cublasHandle_t = FakeCublasContext*;

__attribute__((visibility("default"), noinline)) int cublasCreate_v2(cublasHandle_t* handle) {
  auto* h = new FakeCublasContext;
  if (cuMemAlloc(&h->workspace, 4 << 20) != CUDA_SUCCESS) return 1;  // kept: the handle's own
  *handle = h;
  return 0;
}

__attribute__((visibility("default"), noinline)) int cublasSgemm_v2(cublasHandle_t, int n) {
  void* temporary = nullptr;
  if (cudaMalloc(&temporary, static_cast<size_t>(n) * 1024) != cudaSuccess) return 1;
  return cudaFree(temporary) == cudaSuccess ? 0 : 1;
}

}  // extern "C"

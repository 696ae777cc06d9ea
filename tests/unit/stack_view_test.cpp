// Which frames count as CUDA's own and are dropped above the caller's first frame. The cases are
// the frames seen on the H200 (docs/gpu-validation.md): static cudart internals, cudaMalloc<T>
// inlined from cuda_runtime.h, the shared runtime and driver.
#include <gtest/gtest.h>

#include "gpumemshim/analyzer/stack_view.h"

namespace gpumemshim::analyzer {
namespace {

Frame frame(std::string function, std::string file, std::string module) {
  Frame f;
  f.function = std::move(function);
  f.file = std::move(file);
  f.module = std::move(module);
  return f;
}

TEST(CudaInternalFrames, StaticCudartInternalsAreDropped) {
  EXPECT_TRUE(is_cuda_internal(frame("libcudart_static_5382377d5c772c9d", "", "/tmp/app")));
  EXPECT_TRUE(is_cuda_internal(frame("cudaMalloc", "", "/tmp/app")));
  EXPECT_TRUE(is_cuda_internal(frame("cudart::globalState::init", "", "/tmp/app")));
  EXPECT_TRUE(is_cuda_internal(frame("__cudart1234", "", "/tmp/app")));
}

TEST(CudaInternalFrames, HeaderTemplatesAndCudaLibrariesAreDropped) {
  EXPECT_TRUE(is_cuda_internal(frame(
      "cudaMalloc<float>", "/usr/local/cuda/targets/x86_64-linux/include/cuda_runtime.h", "/tmp/app")));
  EXPECT_TRUE(is_cuda_internal(frame("", "", "/usr/local/cuda/lib64/libcudart.so.13")));
  EXPECT_TRUE(is_cuda_internal(frame("", "", "/usr/lib/x86_64-linux-gnu/libcuda.so.1")));
}

TEST(CudaInternalFrames, UserFramesAreKept) {
  EXPECT_FALSE(is_cuda_internal(frame("make_buffer", "/src/leak.cu", "/tmp/app")));
  // A user function named like an API but with source lines is the user's.
  EXPECT_FALSE(is_cuda_internal(frame("cudaHelper", "/src/helpers.cu", "/tmp/app")));
  EXPECT_FALSE(is_cuda_internal(frame("cub_reduce", "", "/tmp/app")));
  EXPECT_FALSE(is_cuda_internal(frame("c10::cuda::CUDACachingAllocator::malloc", "",
                                      "/torch/lib/libc10_cuda.so")));
}

}  // namespace
}  // namespace gpumemshim::analyzer

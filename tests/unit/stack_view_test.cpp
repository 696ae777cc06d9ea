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

TEST(FrameworkFrames, TorchAndInterpreterFramesAreFramework) {
  // The frames seen between a torch.empty() line and cudaMalloc on the H200 (gpu-validation.md).
  EXPECT_TRUE(is_framework_frame(frame(
      "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::alloc_block", "",
      "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so")));
  EXPECT_TRUE(is_framework_frame(frame("at::detail::empty_cuda", "",
                                       "/venv/site-packages/torch/lib/libtorch_cuda.so")));
  EXPECT_TRUE(is_framework_frame(frame("torch::autograd::THPVariable_empty", "",
                                       "/venv/site-packages/torch/lib/libtorch_python.so")));
  EXPECT_TRUE(is_framework_frame(frame("_PyEval_EvalFrameDefault", "", "/usr/bin/python3.12")));
  EXPECT_TRUE(is_framework_frame(frame("ffi_call", "", "/lib/libffi.so.8")));
}

TEST(FrameworkFrames, PythonLinesAndUserExtensionsAreNot) {
  Frame py = frame("grow", "/src/train.py", "");
  py.python = true;
  EXPECT_FALSE(is_framework_frame(py));
  EXPECT_FALSE(is_framework_frame(frame("my_kernel_launcher", "/src/ext.cu", "/src/my_ext.so")));
}

}  // namespace
}  // namespace gpumemshim::analyzer

TEST(PythonFrames, InterpreterFramesAreRecognised) {
  using gpumemshim::analyzer::Frame;
  using gpumemshim::analyzer::is_python_eval;
  using gpumemshim::analyzer::is_python_internal;
  Frame eval;
  eval.function = "_PyEval_EvalFrameDefault";
  eval.module = "/usr/lib/libpython3.12.so.1.0";
  EXPECT_TRUE(is_python_eval(eval));
  EXPECT_TRUE(is_python_internal(eval));
  Frame ffi;
  ffi.function = "ffi_call_unix64";
  ffi.module = "/usr/lib/x86_64-linux-gnu/libffi.so.8";
  EXPECT_TRUE(is_python_internal(ffi));
  Frame user;
  user.function = "c10::cuda::CUDACachingAllocator::malloc";
  user.module = "/opt/torch/lib/libc10_cuda.so";
  EXPECT_FALSE(is_python_internal(user));
  EXPECT_FALSE(is_python_eval(user));
}

// With no module known (nothing symbolizes), the Python frames still come out, named and with
// lines from their PyCode records, innermost first.
TEST(PythonFrames, PythonStackWithoutSymbolsIsNamedFromPyCode) {
  namespace gf = gpumemshim::format;
  gpumemshim::analyzer::LoadedTrace t;
  t.stacks[7] = {0x1000, 0x2000};
  // co_linetable of `def f():\n    return g()` at line 10: RESUME (line 10), then line 11.
  t.py_codes[1] = {"/app/a.py", "f", std::string("\x80\x00\xd8\x0b\x0c", 5), 10, 11};
  t.py_codes[2] = {"/app/a.py", "<module>", "", 1, 11};
  t.py_stacks[7] = {gf::PyFrameRef{1, 1, 0}, gf::PyFrameRef{2, 0, gf::kPyFrameEntry}};
  gpumemshim::analyzer::StackView view(t);
  const auto& frames = view.frames(7);
  ASSERT_GE(frames.size(), 2u);
  size_t first = 0;
  while (first < frames.size() && !frames[first].python) ++first;
  ASSERT_LE(first + 2, frames.size());
  EXPECT_EQ(frames[first].function, "f");
  EXPECT_EQ(frames[first].file, "/app/a.py");
  EXPECT_EQ(frames[first].line, 11u);
  EXPECT_EQ(frames[first + 1].function, "<module>");
  EXPECT_EQ(frames[first + 1].line, 1u);
}

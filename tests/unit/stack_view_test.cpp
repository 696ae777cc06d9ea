// Which frames count as CUDA's own and are dropped above the caller's first frame. The cases are
// the frames seen on the H200 (docs/gpu-validation.md): static cudart internals, cudaMalloc<T>
// inlined from cuda_runtime.h, the shared runtime and driver. Then stable keys, per frame list
// and per stack id (frames made once per pc).
#include "report/stack_view.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

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

namespace gpumemshim::analyzer {
namespace {

// The key as fmt wrote it before stable_key appended its pieces itself.
std::string reference_key(const std::vector<Frame>& frames) {
  std::string key;
  for (const Frame& f : frames) {
    std::string_view module = f.module;
    if (size_t slash = module.rfind('/'); slash != std::string_view::npos)
      module = module.substr(slash + 1);
    key += !f.function.empty() || !f.file.empty()
               ? fmt::format("{}|{}|{}|{};", f.function, f.file, f.line, module)
               : fmt::format("{}+{:#x};", module, f.module_offset);
  }
  return key;
}

TEST(StableKey, SameTextAsFmt) {
  std::vector<Frame> frames = {frame("main", "/src/app.cpp", "/bin/app"),
                               frame("", "", "/lib/libx.so"), frame("f", "", ""),
                               frame("", "a.py", "mod"), frame("", "", "")};
  frames[0].line = 4294967295u;
  frames[1].module_offset = 0x1a2b;
  frames[4].module_offset = UINT64_MAX;
  EXPECT_EQ(StackView::stable_key(frames), reference_key(frames));
  EXPECT_EQ(
      StackView::stable_key(frames),
      "main|/src/app.cpp|4294967295|app;libx.so+0x1a2b;f||0|;|a.py|0|mod;+0xffffffffffffffff;");
  EXPECT_EQ(StackView::stable_key(std::vector<Frame>{}), "");
}

// Frames are made once per pc and position: a pc that leads one stack and is a return address in
// another, and a shim pc skipped when it leads but kept further out, come out as without the memo.
TEST(StableKey, PerStackIdFromMemoizedPcs) {
  LoadedTrace t;
  t.modules.push_back(ModuleInfo{"/nonexistent/libgpumemshim.so", "", 0x10000, 0x10000, 0x1000});
  t.modules.push_back(ModuleInfo{"/nonexistent/app", "", 0x400000, 0x400000, 0x10000});
  const uint64_t shim = 0x10100, a = 0x401000, b = 0x402000;
  t.stacks[1] = {shim, a, b};
  t.stacks[2] = {a, shim, b};
  t.stacks[3] = {b, a};
  StackView view(t);
  const std::vector<Frame>& s1 = view.frames(1);
  ASSERT_EQ(s1.size(), 2u);
  EXPECT_EQ(s1[0].pc, a);
  EXPECT_EQ(s1[0].module_offset, 0x1000u);
  EXPECT_EQ(s1[1].pc, b);
  const std::vector<Frame>& s2 = view.frames(2);
  ASSERT_EQ(s2.size(), 3u);
  EXPECT_EQ(s2[1].pc, shim);
  EXPECT_EQ(s2[1].module, "/nonexistent/libgpumemshim.so");
  EXPECT_EQ(view.frames(3).size(), 2u);
  // A shim pc first met in a stack's leading run (not symbolized), then further out in another.
  t.stacks[5] = {shim, shim + 0x10, a};
  t.stacks[6] = {a, shim + 0x10, b};
  ASSERT_EQ(view.frames(5).size(), 1u);
  const std::vector<Frame>& s6 = view.frames(6);
  ASSERT_EQ(s6.size(), 3u);
  EXPECT_EQ(s6[1].pc, shim + 0x10);
  EXPECT_EQ(s6[1].module_offset, 0x110u);
  for (uint64_t id : {1, 2, 3, 4, 0, 5, 6}) {
    EXPECT_EQ(view.stable_key(id), StackView::stable_key(view.frames(id)));
    EXPECT_EQ(view.stable_key(id), reference_key(view.frames(id)));
  }
  EXPECT_EQ(view.stable_key(1), "app+0x1000;app+0x2000;");
  EXPECT_EQ(view.stable_key(4), "");
  // A second view of the same trace, asked in another order, gives the same keys.
  StackView fresh(t);
  for (uint64_t id : {6, 5, 3, 2, 1}) EXPECT_EQ(fresh.stable_key(id), view.stable_key(id));
}

}  // namespace
}  // namespace gpumemshim::analyzer

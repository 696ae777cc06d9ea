// Library-owned memory (analyzer/findings/library_owned.h): the table's rules on frames, then on
// traces whose stacks symbolize against functions of this test binary named like the libraries'
// (cublasCreate_v2, at::cuda::getCUDABlasLtWorkspace, MmBackward0::apply): kind "library", never
// leaked, never failing `check`, and a grad_fn label never hiding the library's frames.
#include "findings/library_owned.h"

#include <gtest/gtest.h>
#include <link.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gpumemshim/analyzer/analyze.h"
#include "gpumemshim/analyzer/render.h"
#include "gpumemshim/analyzer/report.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace an = gpumemshim::analyzer;
namespace gf = gpumemshim::format;
using gpumemshim::testing::TempDir;
using gpumemshim::testing::TraceBuilder;

// Functions named as the libraries name theirs; each body differs, so that none is folded into
// another, and noipa keeps each a function of its own at its own address.
volatile int g_sink = 0;
extern "C" __attribute__((noipa)) void cublasCreate_v2() {
  g_sink = 1;
}
extern "C" __attribute__((noipa)) void cublasSgemm_v2() {
  g_sink = 2;
}
namespace at::cuda {
__attribute__((noipa)) void getCUDABlasLtWorkspace() {
  g_sink = 3;
}
}  // namespace at::cuda
namespace torch::autograd::generated {
struct MmBackward0 {
  __attribute__((noipa)) void apply(int n);
};
void MmBackward0::apply(int n) {
  g_sink = 4 + n;
}
}  // namespace torch::autograd::generated
namespace app {
__attribute__((noipa)) void train_step() {
  g_sink = 10;
}
__attribute__((noipa)) void keep_buffer() {
  g_sink = 11;
}
__attribute__((noipa)) void workspace_callback() {
  g_sink = 12;
}
}  // namespace app

namespace {

an::Frame native(std::string function, std::string module) {
  an::Frame f;
  f.function = std::move(function);
  f.module = std::move(module);
  return f;
}

an::Frame python(std::string file, uint32_t line) {
  an::Frame f;
  f.function = "<module>";
  f.file = std::move(file);
  f.line = line;
  f.python = true;
  return f;
}

const char* kCudart = "/usr/lib/libcudart.so.13";
const char* kCuda = "/usr/lib/libcuda.so.1";
const char* kCublas = "/opt/nvidia/lib/libcublas.so.13";
const char* kNccl = "/opt/nvidia/lib/libnccl.so.2";
const char* kC10 = "/opt/torch/lib/libc10_cuda.so";
const char* kTorchCuda = "/opt/torch/lib/libtorch_cuda.so";
const char* kApp = "/srv/app/trainer";

}  // namespace

TEST(LibraryOwnedRules, HandleCreationIsTheLibrarys) {
  // cuMemAlloc inside cublasCreate_v2 (cuBLAS's unnamed internals between), called by PyTorch.
  std::vector<an::Frame> frames = {
      native("cuMemAlloc_v2", kCuda),
      native("", kCublas),
      native("cublasCreate_v2", kCublas),
      native("at::cuda::(anonymous namespace)::createCublasHandle()", kTorchCuda),
      native("at::cuda::getCurrentCUDABlasHandle()", kTorchCuda),
      native("main", kApp)};
  auto owner = an::library_owner(frames);
  ASSERT_TRUE(owner);
  EXPECT_EQ(owner->id, "cublas");  // the innermost library decides
  EXPECT_EQ(owner->library, "cuBLAS");
  EXPECT_EQ(owner->what, "handle");
  EXPECT_EQ(owner->call, "cublasCreate_v2");
  EXPECT_EQ(owner->frame, 2u);
  // Shown above a grad_fn: the library's own frames up to its call, not CUDA's.
  std::vector<an::Frame> shown = an::library_frames(frames, *owner);
  ASSERT_EQ(shown.size(), 2u);
  EXPECT_EQ(shown[0].module, kCublas);
  EXPECT_EQ(shown[1].function, "cublasCreate_v2");
}

TEST(LibraryOwnedRules, PyTorchsWorkspaceGettersThroughItsAllocator) {
  std::vector<an::Frame> frames = {native("c10::cuda::CUDACachingAllocator::Native::"
                                          "NativeCachingAllocator::allocate(unsigned long)",
                                          kC10),
                                   native("at::cuda::getNewWorkspace() [clone .cold]", kTorchCuda),
                                   native("at::cuda::getCurrentCUDABlasHandle()", kTorchCuda),
                                   python("/srv/app/train.py", 12)};
  auto owner = an::library_owner(frames);
  ASSERT_TRUE(owner);
  EXPECT_EQ(owner->id, "torch");
  EXPECT_EQ(owner->what, "cuBLAS workspace");
  EXPECT_EQ(owner->call, "at::cuda::getNewWorkspace");
  frames[1] = native("at::cuda::getCUDABlasLtWorkspace()", kTorchCuda);
  owner = an::library_owner(frames);
  ASSERT_TRUE(owner);
  EXPECT_EQ(owner->what, "cuBLASLt workspace");
  EXPECT_EQ(an::library_frames(frames, *owner).size(), 1u);  // PyTorch's allocator left out
}

TEST(LibraryOwnedRules, ComputeTemporariesAreNotTheLibrarys) {
  // A GEMM's temporary workspace: made inside cuBLAS, but by no handle or workspace getter.
  EXPECT_FALSE(an::library_owner(
      {native("cudaMallocAsync", kCudart), native("", kCublas), native("cublasSgemm_v2", kCublas),
       native("at::cuda::blas::gemm<float>(...)", kTorchCuda), python("/srv/app/train.py", 12)}));
  // Nothing but PyTorch and CUDA: an ordinary tensor.
  EXPECT_FALSE(
      an::library_owner({native("", kC10), native("at::native::empty_cuda(...)", kTorchCuda)}));
  EXPECT_FALSE(an::library_owner({}));
}

TEST(LibraryOwnedRules, TheCallersCodeBetweenMakesItTheCallers) {
  // The program's own frame between the allocation and the library: a callback, the program's.
  EXPECT_FALSE(
      an::library_owner({native("cudaMalloc", kCudart), native("app::on_alloc(void**)", kApp),
                         native("cublasCreate_v2", kCublas)}));
  // Python between them: the same.
  EXPECT_FALSE(an::library_owner({native("cudaMalloc", kCudart), python("/srv/app/hook.py", 3),
                                  native("cublasCreate_v2", kCublas)}));
  EXPECT_FALSE(
      an::library_owner({native("cudaMalloc", kCudart),
                         native("_PyEval_EvalFrameDefault", "/usr/lib/libpython3.12.so.1.0"),
                         native("cublasCreate_v2", kCublas)}));
}

TEST(LibraryOwnedRules, NcclOwnsWhatItsModuleMakesButNotUserBuffers) {
  // Lazily, deep inside a collective: NCCL's buffers, named by its outermost call.
  auto owner = an::library_owner(
      {native("cuMemCreate", kCuda), native("", kNccl), native("ncclAllReduce", kNccl),
       native("c10d::ProcessGroupNCCL::allreduce(...)", "/opt/torch/lib/libtorch_cuda.so"),
       python("/srv/app/train.py", 30)});
  ASSERT_TRUE(owner);
  EXPECT_EQ(owner->id, "nccl");
  EXPECT_EQ(owner->call, "ncclAllReduce");
  EXPECT_EQ(owner->frame, 2u);
  // A statically linked NCCL is known by its calls.
  owner = an::library_owner({native("cuMemAlloc_v2", kCuda), native("ncclCommInitRank", kTorchCuda),
                             native("main", kApp)});
  ASSERT_TRUE(owner);
  EXPECT_EQ(owner->id, "nccl");
  // ncclMemAlloc allocates the caller's buffer (freed with ncclMemFree): the caller's to free.
  EXPECT_FALSE(an::library_owner({native("cuMemCreate", kCuda), native("", kNccl),
                                  native("ncclMemAlloc", kNccl), native("main", kApp)}));
}

TEST(LibraryOwnedRules, EveryLibraryOfTheTable) {
  struct Case {
    const char* function;
    const char* id;
  };
  for (const Case& c :
       {Case{"cublasLtCreate", "cublaslt"}, Case{"cudnnCreate", "cudnn"},
        Case{"cusparseCreate", "cusparse"}, Case{"cusolverDnCreate", "cusolver"},
        Case{"cufftMakePlanMany64", "cufft"}, Case{"at::native::getCudnnHandle()", "torch"},
        Case{"ncclCommInitRankConfig", "nccl"}}) {
    auto owner = an::library_owner({native("cuMemAlloc_v2", kCuda),
                                    native(c.function, "/opt/lib/libx.so"), native("main", kApp)});
    ASSERT_TRUE(owner) << c.function;
    EXPECT_EQ(owner->id, c.id) << c.function;
  }
  // A descriptor or a prefix of a name is not a handle.
  EXPECT_FALSE(an::library_owner(
      {native("cudnnCreateTensorDescriptor", "/opt/lib/libcudnn.so.9"), native("main", kApp)}));
}

// --- traces whose stacks symbolize against this binary ------------------------------------------

namespace {

struct Self {
  std::string path;
  uint64_t bias = 0, start = UINT64_MAX, end = 0;
};

// This executable as the shim records a module: real path, load bias, mapped span.
Self self_module() {
  Self s;
  s.path = std::filesystem::canonical("/proc/self/exe").string();
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* s = static_cast<Self*>(data);
        s->bias = info->dlpi_addr;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          s->start = std::min<uint64_t>(s->start, info->dlpi_addr + ph.p_vaddr);
          s->end = std::max<uint64_t>(s->end, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
        }
        return 1;  // the first entry is the program itself
      },
      &s);
  return s;
}

// A pc inside fn (a frame after the first is looked up at pc - 1: still inside).
template <typename Fn>
uint64_t pc(Fn* fn) {
  return reinterpret_cast<uint64_t>(reinterpret_cast<void*>(fn)) + 2;
}
uint64_t pc_apply() {
  auto method = &torch::autograd::generated::MmBackward0::apply;
  void* p = nullptr;
  static_assert(sizeof(method) >= sizeof(p));
  std::memcpy(&p, &method, sizeof p);  // a non-virtual member: its first word is the address
  return reinterpret_cast<uint64_t>(p) + 2;
}

constexpr uint64_t kPid = 4242;
constexpr uint64_t kHandle = 1, kGemm = 2, kMine = 3, kCallback = 4, kWorkspace = 5, kCaller = 6,
                   kLabeled = 7, kInBackward = 8, kSegment = 9;
constexpr const char* kMmBackward0 = "N5torch8autograd9generated11MmBackward0E";

TraceBuilder traced_program() {
  TraceBuilder t;
  t.process(kPid, "trainer");
  Self self = self_module();
  t.module(self.path, self.start, self.end - self.start, self.bias);
  t.stack(kHandle, {pc(&cublasCreate_v2), pc(&app::train_step)});
  t.stack(kGemm, {pc(&cublasSgemm_v2), pc(&app::train_step)});
  t.stack(kMine, {pc(&app::keep_buffer), pc(&app::train_step)});
  t.stack(kCallback, {pc(&app::workspace_callback), pc(&cublasCreate_v2), pc(&app::train_step)});
  t.stack(kWorkspace, {pc(&at::cuda::getCUDABlasLtWorkspace), pc(&app::train_step)});
  t.stack(kSegment, {pc(&app::train_step)});
  return t;
}

an::Report analyze(const TraceBuilder& t, const TempDir& dir) {
  return an::analyze({t.write(dir.file("t.trace"))});
}

std::vector<const an::SiteGroup*> of_kind(const an::ProcessReport& p, const std::string& kind) {
  std::vector<const an::SiteGroup*> out;
  for (const an::SiteGroup& g : p.leaks)
    if (g.kind == kind) out.push_back(&g);
  return out;
}

// An event of another thread (autograd's device thread), at the builder's next time.
template <typename Record>
void on_thread(TraceBuilder& t, Record r, uint64_t thread) {
  r.time_ns = t.now() + 1000;
  r.thread_id = thread;
  t.add(r);
  t.at(r.time_ns + 1000);
}

}  // namespace

class LibraryOwnedTrace : public ::testing::TestWithParam<bool> {};

// With and without step markers: a cuBLAS handle made at the first GEMM of each of two threads
// (one with every step) is "library", counted apart; the script's own buffer stays its leak.
TEST_P(LibraryOwnedTrace, HandlesAreLibraryAndNeverLeaked) {
  const bool steps = GetParam();
  TempDir dir;
  TraceBuilder t = traced_program();
  if (steps) t.marker(gf::MarkerKind::kStep, "step");
  t.alloc(0x1000000, 8 << 20, kHandle, gf::Api::kCuMemAlloc);
  for (int i = 0; i < 4; ++i) {
    t.alloc(0x3000000, 1 << 20, kGemm, gf::Api::kCudaMalloc).free(0x3000000);
    if (i == 2) t.alloc(0x2000000, 8 << 20, kHandle, gf::Api::kCuMemAlloc);  // another thread's
    t.alloc(0x4000000 + static_cast<uint64_t>(i) * 4096, 4096, kMine);
    if (steps) t.marker(gf::MarkerKind::kStep, "step");
  }
  t.end();
  an::Report r = analyze(t, dir);
  const an::ProcessReport& p = r.processes.at(0);
  auto library = of_kind(p, "library");
  ASSERT_EQ(library.size(), 1u) << an::report_text(r);
  EXPECT_EQ(library[0]->bytes, 16u << 20);
  EXPECT_EQ(library[0]->count, 2u);
  EXPECT_EQ(library[0]->owner, "cublas");
  EXPECT_EQ(library[0]->owner_call, "cublasCreate_v2");
  EXPECT_EQ(library[0]->reason.rfind("cuBLAS's handle, made by cublasCreate_v2", 0), 0u)
      << library[0]->reason;
  EXPECT_EQ(p.summary.library_bytes, 16u << 20);
  EXPECT_EQ(p.summary.library_allocations, 2u);
  EXPECT_EQ(r.summary.library_bytes, 16u << 20);
  // The script's buffers: a leak (four steps' worth accumulate, or no steps at all).
  auto leaks = of_kind(p, "leak");
  ASSERT_EQ(leaks.size(), 1u) << an::report_text(r);
  EXPECT_EQ(leaks[0]->bytes, 4u * 4096);
  EXPECT_TRUE(leaks[0]->owner.empty());
  EXPECT_EQ(r.summary.leaked_bytes, 4u * 4096);
  EXPECT_EQ(p.summary.retained_bytes, 0u);
  // Text and JSON show it on a line of its own.
  EXPECT_NE(
      an::report_text(r).find("library (not leaks): 16.00 MiB (16777216 bytes) in 2 allocations"),
      std::string::npos);
  auto json = an::report_json(r);
  EXPECT_EQ(json["summary"]["library_bytes"], 16u << 20);
  EXPECT_EQ(json["summary"]["library_allocations"], 2u);
}

INSTANTIATE_TEST_SUITE_P(StepsOrNot, LibraryOwnedTrace, ::testing::Bool());

TEST(LibraryOwnedTraces, GemmTemporariesAndCallbacksStayTheScripts) {
  TempDir dir;
  TraceBuilder t = traced_program();
  t.alloc(0x1000000, 1 << 20, kGemm);      // a GEMM's temporary that survived: reported
  t.alloc(0x2000000, 2 << 20, kCallback);  // the program's callback inside the library
  t.end();
  an::Report r = analyze(t, dir);
  EXPECT_TRUE(of_kind(r.processes.at(0), "library").empty()) << an::report_text(r);
  EXPECT_EQ(r.summary.leaked_bytes, 3u << 20);
}

TEST(LibraryOwnedTraces, PyTorchsWorkspaceBlockIsLibrary) {
  TempDir dir;
  TraceBuilder t = traced_program();
  t.alloc(0x10000000, 64 << 20, kSegment);  // the caching allocator's segment
  t.torch(gf::TorchAction::kSegmentAlloc, 0x10000000, 64 << 20);
  t.torch(gf::TorchAction::kAlloc, 0x10000000, 32 << 20, kWorkspace);
  t.torch(gf::TorchAction::kAlloc, 0x12000000, 1 << 20, kMine);  // a tensor the script keeps
  t.end();
  an::Report r = analyze(t, dir);
  const an::ProcessReport& p = r.processes.at(0);
  auto library = of_kind(p, "library");
  ASSERT_EQ(library.size(), 1u) << an::report_text(r);
  EXPECT_TRUE(library[0]->torch_block);
  EXPECT_EQ(library[0]->bytes, 32u << 20);
  EXPECT_EQ(library[0]->owner, "torch");
  EXPECT_EQ(library[0]->owner_call, "at::cuda::getCUDABlasLtWorkspace");
  EXPECT_NE(library[0]->reason.find("PyTorch's cuBLASLt workspace"), std::string::npos);
  EXPECT_EQ(of_kind(p, "cached").size(), 1u);
  EXPECT_EQ(r.summary.leaked_bytes, 1u << 20);
}

// Autograd's device thread inside a backward pass: a workspace block the bridge named by its
// grad_fn (with its native frames walked), and a handle whose native frames hold the grad_fn.
// Both show the library's frames, then the grad_fn, then the backward() caller.
TEST(LibraryOwnedTraces, GradFnNeverHidesTheLibraryFrames) {
  TempDir dir;
  TraceBuilder t = traced_program();
  t.stack(kCaller, {pc(&app::train_step)});
  t.stack(kLabeled, {pc(&at::cuda::getCUDABlasLtWorkspace), pc_apply()});
  t.add(gf::StackLabelRecord{kLabeled, kMmBackward0});
  t.stack(kInBackward, {pc(&cublasCreate_v2), pc_apply()});
  gf::MarkerRecord push;
  push.kind = gf::MarkerKind::kRangePush;
  push.name = "torch.backward";
  push.stack_id = kCaller;
  on_thread(t, push, 1);
  t.torch(gf::TorchAction::kSegmentAlloc, 0x10000000, 64 << 20);
  gf::TorchEventRecord block;
  block.action = gf::TorchAction::kAlloc;
  block.address = 0x10000000;
  block.size = 32 << 20;
  block.stack_id = kLabeled;
  on_thread(t, block, 2);
  gf::AllocRecord handle;
  handle.api = gf::Api::kCuMemAlloc;
  handle.kind = gf::MemoryKind::kDevice;
  handle.address = 0x20000000;
  handle.size = 4 << 20;
  handle.stack_id = kInBackward;
  on_thread(t, handle, 2);
  gf::MarkerRecord pop = push;
  pop.kind = gf::MarkerKind::kRangePop;
  on_thread(t, pop, 1);
  t.end();
  an::Report r = analyze(t, dir);
  auto library = of_kind(r.processes.at(0), "library");
  ASSERT_EQ(library.size(), 2u) << an::report_text(r);
  for (const an::SiteGroup* g : library) {
    SCOPED_TRACE(g->owner);
    ASSERT_EQ(g->stack.size(), 3u) << an::report_text(r);
    EXPECT_EQ(g->stack[1].function, "MmBackward0");
    EXPECT_EQ(g->stack[1].module, "grad_fn");
    EXPECT_EQ(g->stack[2].function, "app::train_step()");
  }
  const an::SiteGroup* workspace = library[0]->owner == "torch" ? library[0] : library[1];
  const an::SiteGroup* created = library[0]->owner == "torch" ? library[1] : library[0];
  EXPECT_EQ(workspace->stack[0].function, "at::cuda::getCUDABlasLtWorkspace()");
  EXPECT_EQ(created->owner, "cublas");
  EXPECT_EQ(created->stack[0].function, "cublasCreate_v2");
  EXPECT_EQ(r.summary.leaked_bytes, 0u);
}

// `check --max-leak-bytes 0`: the libraries' memory alone passes; the script's leak next to it
// fails.
TEST(LibraryOwnedTraces, CheckPassesOnLibraryMemoryAndFailsOnTheScriptsLeak) {
  TempDir dir;
  auto check = [&](const TraceBuilder& t, const std::string& name) {
    std::string path = t.write(dir.file(name));
    std::string cmd = "'" GPUMEMSHIM_CLI "' check --max-leak-bytes 0 '" + path + "' >'" +
                      dir.file("out") + "' 2>&1";
    int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  TraceBuilder library = traced_program();
  library.alloc(0x1000000, 8 << 20, kHandle, gf::Api::kCuMemAlloc);
  library.end();
  EXPECT_EQ(check(library, "library.trace"), 0);
  TraceBuilder both = traced_program();
  both.alloc(0x1000000, 8 << 20, kHandle, gf::Api::kCuMemAlloc);
  both.alloc(0x2000000, 4096, kMine);
  both.end();
  EXPECT_EQ(check(both, "both.trace"), 1);
}

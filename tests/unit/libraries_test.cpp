// Device memory by library (analyzer/findings/libraries.h): who asked CUDA for each allocation,
// told from the innermost native frame outside the shim and CUDA, then one row per library in the
// text, JSON and HTML reports with what it held at the process's peak, its own peak and at the end.
#include "findings/libraries.h"

#include <gtest/gtest.h>

#include <string>

#include "gpumemshim/analyzer/analyze.h"
#include "gpumemshim/analyzer/render.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace an = gpumemshim::analyzer;
namespace gf = gpumemshim::format;
using gpumemshim::testing::TempDir;
using gpumemshim::testing::TraceBuilder;

TEST(LibraryIdentity, FrameworksLibrariesTheProgramAndExtensions) {
  auto name = [](std::string_view module, std::string_view exe = "/usr/bin/python3.12") {
    return an::identify_library(module, exe).name;
  };
  auto role = [](std::string_view module, std::string_view exe = "/usr/bin/python3.12") {
    return an::identify_library(module, exe).role;
  };
  EXPECT_EQ(name("/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so"),
            "PyTorch (caching allocator)");
  EXPECT_EQ(role("/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so"), "framework");
  EXPECT_EQ(name("/venv/lib/python3.12/site-packages/cupy_backends/cuda/api/"
                 "runtime.cpython-312-x86_64-linux-gnu.so"),
            "CuPy (memory pool)");
  EXPECT_EQ(name("/venv/lib/python3.12/site-packages/jaxlib/_jax.so"), "XLA (jaxlib)");
  EXPECT_EQ(name("/venv/lib/python3.12/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so"),
            "XLA (jaxlib)");
  EXPECT_EQ(name("/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"), "NCCL");
  EXPECT_EQ(name("/usr/local/cuda/lib64/libcublasLt.so.13"), "cuBLASLt");
  EXPECT_EQ(name("/usr/local/cuda/lib64/libcublas.so.13"), "cuBLAS");
  EXPECT_EQ(name("/opt/cudnn/lib/libcudnn_engines_precompiled.so.9"), "cuDNN");
  EXPECT_EQ(role("/opt/cudnn/lib/libcudnn_engines_precompiled.so.9"), "library");
  // Python calling cudaMalloc through ctypes: libffi asked, the interpreter's own binary too.
  EXPECT_EQ(role("/usr/lib/x86_64-linux-gnu/libffi.so.8"), "python");
  EXPECT_EQ(role("/usr/bin/python3.12"), "python");
  // A native program asks itself; a user's extension module is named by its file.
  EXPECT_EQ(name("/srv/bin/trainer", "/srv/bin/trainer"), "trainer (the program)");
  EXPECT_EQ(role("/srv/bin/trainer", "/srv/bin/trainer"), "program");
  EXPECT_EQ(name("/srv/app/build/my_ops.cpython-312-x86_64-linux-gnu.so"),
            "my_ops.cpython-312-x86_64-linux-gnu.so");
  EXPECT_EQ(role("/srv/app/build/my_ops.cpython-312-x86_64-linux-gnu.so"), "library");
  EXPECT_EQ(role(""), "unknown");
}

namespace {

// Modules at made-up addresses (no file: frames are named by module and offset, which is all the
// attribution reads). The shim's caller is innermost; CUDA's own frames come before it.
struct Mod {
  const char* path;
  uint64_t base;
};
constexpr Mod kCudart{"/usr/local/cuda/lib64/libcudart.so.13", 0x7f1000000000};
constexpr Mod kDriver{"/usr/lib/x86_64-linux-gnu/libcuda.so.1", 0x7f2000000000};
constexpr Mod kC10{"/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so", 0x7f3000000000};
constexpr Mod kNccl{"/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
                    0x7f4000000000};
constexpr Mod kCublas{"/usr/local/cuda/lib64/libcublas.so.13", 0x7f5000000000};
constexpr Mod kExt{"/srv/app/my_ops.so", 0x7f6000000000};
constexpr Mod kApp{"/bin/app", 0x400000};  // TraceBuilder's process executable
constexpr Mod kMods[] = {kCudart, kDriver, kC10, kNccl, kCublas, kExt, kApp};

uint64_t in(const Mod& m, uint64_t offset = 0x100) {
  return m.base + offset;
}

enum Stack : uint64_t { kTorch = 1, kNcclA, kNcclB, kCublasWs, kMine, kProgram };

constexpr uint64_t kMiB = 1 << 20;

// A process whose device memory comes from PyTorch's allocator, NCCL (two call sites that peak at
// different times), cuBLAS through the driver API, a user's extension and the program itself.
TraceBuilder mixed_process() {
  TraceBuilder t;
  t.process(77, "python train.py");
  for (const Mod& m : kMods) t.module(m.path, m.base, 0x100000);
  t.stack(kTorch, {in(kCudart), in(kC10), in(kApp, 0x10)});
  t.stack(kNcclA, {in(kCudart), in(kNccl, 0x200), in(kApp, 0x20)});
  t.stack(kNcclB, {in(kCudart), in(kNccl, 0x300), in(kApp, 0x30)});
  t.stack(kCublasWs, {in(kDriver), in(kCublas), in(kApp, 0x40)});
  t.stack(kMine, {in(kCudart), in(kExt), in(kApp, 0x50)});
  t.stack(kProgram, {in(kCudart), in(kApp, 0x60)});
  t.alloc(0x10000000, 10 * kMiB, kNcclA);  // NCCL's first buffers, freed before the second site
  t.free(0x10000000);
  t.alloc(0x20000000, 6 * kMiB, kNcclB);
  t.alloc(0x30000000, 64 * kMiB, kTorch);
  t.alloc(0x40000000, 8 * kMiB, kCublasWs, gf::Api::kCuMemAlloc);
  t.alloc(0x50000000, 4 * kMiB, kMine);
  t.alloc(0x60000000, 1 * kMiB, kProgram);  // the process's peak: 83 MiB
  t.free(0x30000000);
  t.free(0x50000000);
  t.end();
  return t;
}

const an::LibraryMemory* row(const an::ProcessReport& p, std::string_view name) {
  for (const an::LibraryMemory& r : p.libraries)
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace

TEST(LibraryTable, EveryAllocationIsItsAskersWithPeakAndEnd) {
  TempDir dir;
  an::Report report = an::analyze({mixed_process().write(dir.file("t.trace"))});
  const an::ProcessReport& p = report.processes.at(0);
  ASSERT_EQ(p.libraries.size(), 5u);
  // By what each held at the process's peak.
  EXPECT_EQ(p.libraries[0].name, "PyTorch (caching allocator)");
  EXPECT_EQ(p.libraries[1].name, "cuBLAS");
  EXPECT_EQ(p.libraries[2].name, "NCCL");
  EXPECT_EQ(p.libraries[3].name, "my_ops.so");
  EXPECT_EQ(p.libraries[4].name, "app (the program)");

  const an::LibraryMemory* nccl = row(p, "NCCL");
  ASSERT_NE(nccl, nullptr);
  EXPECT_EQ(nccl->module, "libnccl.so.2");
  EXPECT_EQ(nccl->role, "library");
  EXPECT_EQ(nccl->sites, 2u);
  // Its own peak is the first site's 10 MiB alone, not the two sites' peaks summed.
  EXPECT_EQ(nccl->peak_bytes, 10 * kMiB);
  EXPECT_EQ(nccl->at_peak_bytes, 6 * kMiB);
  EXPECT_EQ(nccl->end_bytes, 6 * kMiB);

  const an::LibraryMemory* torch = row(p, "PyTorch (caching allocator)");
  ASSERT_NE(torch, nullptr);
  EXPECT_EQ(torch->role, "framework");
  EXPECT_EQ(torch->at_peak_bytes, 64 * kMiB);
  EXPECT_EQ(torch->end_bytes, 0u);
  EXPECT_EQ(row(p, "cuBLAS")->end_bytes, 8 * kMiB);  // the driver API's frames are CUDA's
  EXPECT_EQ(row(p, "my_ops.so")->end_bytes, 0u);
  EXPECT_EQ(row(p, "app (the program)")->role, "program");

  // Every output renders the same rows.
  nlohmann::json j = an::report_json(report);
  const nlohmann::json& libs = j["processes"][0]["libraries"];
  ASSERT_EQ(libs.size(), 5u);
  EXPECT_EQ(libs[2]["name"], "NCCL");
  EXPECT_EQ(libs[2]["module"], "libnccl.so.2");
  EXPECT_EQ(libs[2]["peak_bytes"], 10 * kMiB);
  EXPECT_EQ(libs[2]["at_peak_bytes"], 6 * kMiB);
  EXPECT_EQ(libs[2]["end_bytes"], 6 * kMiB);
  EXPECT_EQ(libs[2]["sites"], 2);
  const std::string text = an::report_text(report);
  EXPECT_NE(text.find("device memory by library:"), std::string::npos) << text;
  EXPECT_NE(text.find("NCCL"), std::string::npos);
  EXPECT_NE(text.find("10.00 MiB"), std::string::npos);
  const std::string html = an::report_html(report);
  EXPECT_NE(html.find("Device memory by library"), std::string::npos);
  EXPECT_NE(html.find("<td>libnccl.so.2</td>"), std::string::npos);
}

TEST(LibraryTable, AllocationsWithoutANativeStackAreSaidToBeUnknown) {
  TempDir dir;
  TraceBuilder t;
  t.process(78, "python only_python_stacks.py");
  t.alloc(0x1000, 2 * kMiB);  // GPUMEMSHIM_STACKS=python or none: no native frames recorded
  t.end();
  an::Report report = an::analyze({t.write(dir.file("t.trace"))});
  const an::ProcessReport& p = report.processes.at(0);
  ASSERT_EQ(p.libraries.size(), 1u);
  EXPECT_EQ(p.libraries[0].role, "unknown");
  EXPECT_EQ(p.libraries[0].end_bytes, 2 * kMiB);
  EXPECT_TRUE(an::report_json(report)["processes"][0]["libraries"][0]["module"].is_null());
}

namespace {

constexpr Mod kCupyRuntime{
    "/venv/lib/python3.12/site-packages/cupy_backends/cuda/api/"
    "runtime.cpython-312-x86_64-linux-gnu.so",
    0x7f7000000000};
constexpr Mod kCupyMemory{
    "/venv/lib/python3.12/site-packages/cupy/cuda/"
    "memory.cpython-312-x86_64-linux-gnu.so",
    0x7f8000000000};
constexpr uint64_t kPoolSegment = 20, kExtBuffer = 21, kTorchSegment = 22;

// CuPy's pool asks cudaMalloc through cupy_backends' runtime module, from its memory module; the
// same kind of segments made by a user's extension are not a pool's.
TraceBuilder cupy_process(uint64_t device_total) {
  TraceBuilder t;
  t.process(79, "python cupy_twin.py");
  t.device(0, device_total);
  for (const Mod& m : {kCudart, kCupyRuntime, kCupyMemory, kExt, kC10, kApp})
    t.module(m.path, m.base, 0x100000);
  t.stack(kPoolSegment, {in(kCudart), in(kCupyRuntime), in(kCupyMemory), in(kApp, 0x70)});
  t.stack(kExtBuffer, {in(kCudart), in(kExt, 0x200), in(kApp, 0x80)});
  t.stack(kTorchSegment, {in(kCudart), in(kC10, 0x200), in(kApp, 0x90)});
  return t;
}

std::vector<const an::SiteGroup*> kind_of(const an::ProcessReport& p, std::string_view kind) {
  std::vector<const an::SiteGroup*> out;
  for (const an::SiteGroup& g : p.leaks)
    if (g.kind == kind) out.push_back(&g);
  return out;
}

const an::Advice* advice(const an::ProcessReport& p, std::string_view id) {
  for (const an::Advice& a : p.advice)
    if (a.id == id) return &a;
  return nullptr;
}

}  // namespace

TEST(CupyPool, SegmentsThePoolKeepsAtExitAreCachedNotLeaked) {
  TempDir dir;
  TraceBuilder t = cupy_process(8ull << 30);
  for (uint64_t i = 0; i < 3; ++i) t.alloc(0x10000000 + i * 0x1000000, 4 * kMiB, kPoolSegment);
  t.alloc(0x40000000, 4 * kMiB, kExtBuffer);  // the twin: the user's own extension keeps one
  t.end();
  an::Report report = an::analyze({t.write(dir.file("t.trace"))});
  const an::ProcessReport& p = report.processes.at(0);
  auto cached = kind_of(p, "cached");
  ASSERT_EQ(cached.size(), 1u);
  EXPECT_EQ(cached[0]->bytes, 12 * kMiB);
  EXPECT_NE(cached[0]->reason.find("CuPy's memory pool"), std::string::npos) << cached[0]->reason;
  EXPECT_NE(cached[0]->reason.find("free_all_blocks()"), std::string::npos);
  auto leaks = kind_of(p, "leak");
  ASSERT_EQ(leaks.size(), 1u);
  EXPECT_EQ(leaks[0]->bytes, 4 * kMiB);
  EXPECT_EQ(report.summary.leaked_bytes, 4 * kMiB);
  EXPECT_EQ(report.summary.cached_bytes, 12 * kMiB);
  // The pool is a framework's row of the library table.
  const an::LibraryMemory* pool = row(p, "CuPy (memory pool)");
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->role, "framework");
  EXPECT_EQ(pool->end_bytes, 12 * kMiB);
  // The report says what the pool lets the trace show.
  ASSERT_EQ(p.frameworks.size(), 1u);
  EXPECT_EQ(p.frameworks[0].framework, "CuPy");
  EXPECT_NE(p.frameworks[0].cannot_show.find("reported as cached"), std::string::npos);
  // Not near the device's 8 GiB and nothing failed: no advice to free the pool.
  EXPECT_EQ(advice(p, "cupy-free-all-blocks"), nullptr);
}

TEST(CupyPool, APoolThatFillsTheDeviceBeforeAnOomGetsFreeAllBlocksAdvice) {
  TempDir dir;
  TraceBuilder t = cupy_process(1ull << 30);
  for (uint64_t i = 0; i < 6; ++i) t.alloc(0x10000000 + i * 0x10000000, 128 * kMiB, kPoolSegment);
  t.alloc(0x80000000, 64 * kMiB, kTorchSegment);
  t.failed(512 * kMiB, 2, kTorchSegment);  // PyTorch's allocator cannot get its next segment
  t.end();
  an::Report report = an::analyze({t.write(dir.file("t.trace"))});
  const an::ProcessReport& p = report.processes.at(0);
  const an::Advice* a = advice(p, "cupy-free-all-blocks");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->finding, "peak:79");
  EXPECT_NE(a->action.find("cupy.get_default_memory_pool().free_all_blocks()"), std::string::npos);
  EXPECT_NE(a->evidence.find(
                "CuPy's memory pool held 768.00 MiB of the 832.00 MiB live at the peak (92%)"),
            std::string::npos)
      << a->evidence;
  EXPECT_NE(a->evidence.find("an allocation of 512.00 MiB via cudaMalloc failed"),
            std::string::npos)
      << a->evidence;
  // The JSON report carries it like any other advice.
  bool in_json = false;
  const nlohmann::json j_report = an::report_json(report);
  for (const auto& j : j_report["recommendations"]) in_json |= j["id"] == "cupy-free-all-blocks";
  EXPECT_TRUE(in_json);
}

namespace {

constexpr Mod kXla{"/venv/lib/python3.12/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so",
                   0x7f9000000000};
constexpr Mod kPython{"/usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0", 0x7fa000000000};
constexpr uint64_t kXlaPool = 30, kXlaBuffer = 31;

// A JAX process: XLA's allocations through the driver API, with the allocator settings the Python
// package writes when jax is imported (none: jax imported without it).
TraceBuilder jax_process(
    std::initializer_list<std::pair<std::string_view, std::string_view>> attributes) {
  TraceBuilder t;
  t.process(80, "python jax_loop.py");
  t.device(0, 8ull << 30);
  for (const auto& [key, value] : attributes) t.add(gf::AttributeRecord{key, value});
  for (const Mod& m : {kDriver, kXla, kApp, kPython}) t.module(m.path, m.base, 0x100000);
  t.stack(kXlaPool, {in(kDriver), in(kXla, 0x400), in(kApp, 0xa0)});
  t.stack(kXlaBuffer, {in(kDriver), in(kXla, 0x500), in(kPython, 0xb0)});
  return t;
}

const an::FrameworkMode* mode(const an::ProcessReport& p, std::string_view framework) {
  for (const an::FrameworkMode& m : p.frameworks)
    if (m.framework == framework) return &m;
  return nullptr;
}

}  // namespace

TEST(JaxMode, ThePreallocatedPoolIsNamedWithWhatItHidesAndThePlatformAllocatorAdvised) {
  TempDir dir;
  TraceBuilder t = jax_process({{"jax.version", "0.8.1"},
                                {"jax.preallocate", "true"},
                                {"jax.allocator", "default"},
                                {"jax.mem_fraction", "0.75"}});
  t.alloc(0x100000000, 6ull << 30, kXlaPool, gf::Api::kCuMemAlloc);  // 75 % of 8 GiB at start
  t.end();
  an::Report report = an::analyze({t.write(dir.file("t.trace"))});
  const an::ProcessReport& p = report.processes.at(0);
  const an::FrameworkMode* jax = mode(p, "JAX");
  ASSERT_NE(jax, nullptr);
  EXPECT_EQ(jax->seen_from, "environment");
  EXPECT_NE(jax->mode.find("preallocated pool (JAX's default: 0.75 of the device taken at start)"),
            std::string::npos)
      << jax->mode;
  EXPECT_NE(jax->cannot_show.find("arrays inside the pool"), std::string::npos);
  const an::Advice* a = advice(p, "jax-platform-allocator");
  ASSERT_NE(a, nullptr);
  EXPECT_NE(a->action.find("XLA_PYTHON_CLIENT_ALLOCATOR=platform"), std::string::npos);
  EXPECT_EQ(a->finding, "xla:80");
  // Said in every output.
  const nlohmann::json j = an::report_json(report);
  EXPECT_EQ(j["processes"][0]["frameworks"][0]["framework"], "JAX");
  EXPECT_FALSE(j["processes"][0]["frameworks"][0]["cannot_show"].is_null());
  EXPECT_NE(an::report_text(report).find("JAX allocator: preallocated pool"), std::string::npos);
  EXPECT_NE(an::report_html(report).find("<b>JAX allocator</b>"), std::string::npos);
  // XLA is a framework's row of the library table.
  const an::LibraryMemory* xla = row(p, "XLA (jaxlib)");
  ASSERT_NE(xla, nullptr);
  EXPECT_EQ(xla->role, "framework");
}

TEST(JaxMode, WithoutThePackageOneHugeAllocationIsInferredToBeThePool) {
  TempDir dir;
  TraceBuilder t = jax_process({});
  t.alloc(0x100000000, 6ull << 30, kXlaPool, gf::Api::kCuMemAlloc);
  t.end();
  an::Report report = an::analyze({t.write(dir.file("t.trace"))});
  const an::FrameworkMode* jax = mode(report.processes.at(0), "JAX");
  ASSERT_NE(jax, nullptr);
  EXPECT_EQ(jax->seen_from, "allocations");
  EXPECT_NE(
      jax->mode.find("preallocated pool (inferred: XLA held 6.00 GiB of the device's 8.00 GiB)"),
      std::string::npos)
      << jax->mode;
}

TEST(JaxMode, ThePlatformAllocatorHidesNothingAndGetsNoAdvice) {
  TempDir dir;
  TraceBuilder t = jax_process({{"jax.preallocate", "false"}, {"jax.allocator", "platform"}});
  // XLA allocates a jitted call's outputs on the dispatching thread, under the script's line.
  t.python_stack(kXlaBuffer, {{"/srv/jax_loop.py", "<module>", 21}});
  for (uint64_t i = 0; i < 4; ++i)
    t.alloc(0x100000000 + i * 0x1000000, 4 * kMiB, kXlaBuffer, gf::Api::kCuMemAlloc);
  t.end();
  an::Report report = an::analyze({t.write(dir.file("t.trace"))});
  const an::ProcessReport& p = report.processes.at(0);
  // XLA's own frames are the framework's: the buffers are shown at the script's line first.
  ASSERT_FALSE(p.leaks.empty());
  ASSERT_FALSE(p.leaks[0].stack.empty());
  EXPECT_TRUE(p.leaks[0].stack[0].python);
  EXPECT_EQ(p.leaks[0].stack[0].file, "/srv/jax_loop.py");
  EXPECT_EQ(p.leaks[0].stack[0].line, 21u);
  EXPECT_EQ(row(p, "XLA (jaxlib)")->top_site, "jax_loop.py:21 <module>");
  const an::FrameworkMode* jax = mode(p, "JAX");
  ASSERT_NE(jax, nullptr);
  EXPECT_NE(jax->mode.find("platform allocator"), std::string::npos);
  EXPECT_TRUE(jax->cannot_show.empty());
  EXPECT_EQ(advice(p, "jax-platform-allocator"), nullptr);
  // A pool grown on demand still hides its arrays.
  TraceBuilder grown = jax_process({{"jax.preallocate", "false"}, {"jax.allocator", "default"}});
  grown.alloc(0x100000000, 64 * kMiB, kXlaPool, gf::Api::kCuMemAlloc);
  grown.end();
  an::Report r2 = an::analyze({grown.write(dir.file("g.trace"))});
  const an::FrameworkMode* grown_mode = mode(r2.processes.at(0), "JAX");
  ASSERT_NE(grown_mode, nullptr);
  EXPECT_NE(grown_mode->mode.find("pool grown on demand"), std::string::npos);
  EXPECT_NE(advice(r2.processes.at(0), "jax-platform-allocator"), nullptr);
}

TEST(FrameworkModes, AProcessWithoutJaxOrCupySaysNothing) {
  TempDir dir;
  an::Report report = an::analyze({mixed_process().write(dir.file("t.trace"))});
  EXPECT_TRUE(report.processes.at(0).frameworks.empty());
}

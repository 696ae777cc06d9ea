// Every byte accounted (analyzer/findings/accounting.h): the device's view against what the trace
// explains, on synthesized traces.
#include "findings/accounting.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpumemshim/analyzer/analyze.h"
#include "gpumemshim/analyzer/render.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace an = gpumemshim::analyzer;
namespace gf = gpumemshim::format;
using gpumemshim::testing::TempDir;
using gpumemshim::testing::TraceBuilder;

namespace {

constexpr int64_t MiB = 1 << 20;
constexpr uint64_t kTotal = 80ull << 30;
constexpr int64_t kContext = 300 * MiB;

TraceBuilder base_trace() {
  TraceBuilder t;
  t.process(100, "app");
  t.module("/nonexistent/bin/app", 0x400000, 0x10000);
  t.device(0, kTotal);
  t.stack(1, {0x401000});
  return t;
}

an::ProcessReport analyze(TraceBuilder& t, const TempDir& dir) {
  an::Report r = an::analyze({t.write(dir.file("t.trace"))});
  EXPECT_EQ(r.processes.size(), 1u);
  return r.processes.at(0);
}

// The text report's accounting lines.
std::vector<std::string> accounting_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = text.find("device view ", at)) != std::string::npos) {
    const size_t end = text.find('\n', at);
    out.push_back(text.substr(at, end - at));
    at = end;
  }
  return out;
}

}  // namespace

// NVML's figure for this process = what the trace holds then + the rest, at the peak and at the
// end, each compared at the moment of its sample.
TEST(Accounting, NvmlViewIsTracedPlusNotExplainedAtThePeakAndTheEnd) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0xa000000, 100 * MiB, 1);
  t.process_memory(100 * MiB + kContext, 1ull << 30, kTotal);  // t=2000: 100 MiB traced
  t.alloc(0xb000000, 50 * MiB, 1);                             // t=3000: the peak, 150 MiB
  t.process_memory(150 * MiB + kContext, 1ull << 30, kTotal);  // t=4000: as near, and later
  t.free(0xa000000);
  t.process_memory(50 * MiB + kContext, 1ull << 30, kTotal);
  t.end();
  const an::ProcessReport p = analyze(t, dir);
  ASSERT_EQ(p.accounting.size(), 2u);
  const an::AccountingPoint& peak = p.accounting[0];
  EXPECT_EQ(peak.at, "peak");
  EXPECT_EQ(peak.source, "nvml");
  EXPECT_FALSE(peak.device_wide);
  EXPECT_EQ(peak.time_ns, 4000u);
  EXPECT_EQ(peak.device_view_bytes, static_cast<uint64_t>(150 * MiB + kContext));
  EXPECT_EQ(peak.traced_bytes, static_cast<uint64_t>(150 * MiB));
  EXPECT_EQ(peak.not_explained_bytes, kContext);
  EXPECT_EQ(peak.device_total_bytes, kTotal);
  EXPECT_EQ(peak.likely_owners, std::vector<std::string>{"CUDA context"});
  const an::AccountingPoint& end = p.accounting[1];
  EXPECT_EQ(end.at, "end");
  EXPECT_EQ(end.traced_bytes, static_cast<uint64_t>(50 * MiB));
  EXPECT_EQ(end.not_explained_bytes, kContext);
}

// The sample nearest the peak's time, before or after it; the peak is the first time the highest
// live bytes were reached.
TEST(Accounting, ThePeakTakesTheNearestSample) {
  TempDir dir;
  {
    TraceBuilder t = base_trace();
    t.at(1000).process_memory(kContext, 1ull << 30, kTotal);
    t.at(90'000).process_memory(kContext, 1ull << 30, kTotal);  // nearer the peak, before it
    t.at(100'000).alloc(0xa000000, 10 * MiB, 1);
    t.at(200'000).process_memory(10 * MiB + kContext, 1ull << 30, kTotal);
    t.at(300'000).free(0xa000000);
    t.at(400'000).process_memory(kContext, 1ull << 30, kTotal);
    const an::ProcessReport p = analyze(t, dir);
    ASSERT_EQ(p.accounting.size(), 2u);
    EXPECT_EQ(p.accounting[0].time_ns, 90'000u);
    EXPECT_EQ(p.accounting[0].traced_bytes, 0u);  // what the trace held when that sample was taken
    EXPECT_EQ(p.accounting[0].not_explained_bytes, kContext);
  }
  {
    TraceBuilder t = base_trace();
    t.at(1000).process_memory(kContext, 1ull << 30, kTotal);
    t.at(100'000).alloc(0xa000000, 10 * MiB, 1);
    t.at(110'000).process_memory(10 * MiB + kContext, 1ull << 30, kTotal);  // nearer, after it
    t.at(150'000).alloc(0xb000000, 1 * MiB, 1);  // a lower high: the peak stays at 100'000
    t.at(151'000).free(0xb000000);
    t.at(300'000).free(0xa000000);
    t.at(400'000).process_memory(kContext, 1ull << 30, kTotal);
    const an::ProcessReport p = analyze(t, dir);
    ASSERT_EQ(p.accounting.size(), 2u);
    EXPECT_EQ(p.accounting[0].time_ns, 110'000u);
    EXPECT_EQ(p.accounting[0].traced_bytes, static_cast<uint64_t>(10 * MiB));
  }
  {  // the peak after the last sample: that sample is the end's, and no peak line repeats it
    TraceBuilder t = base_trace();
    t.process_memory(kContext, 1ull << 30, kTotal);
    t.alloc(0xa000000, 10 * MiB, 1);
    const an::ProcessReport p = analyze(t, dir);
    ASSERT_EQ(p.accounting.size(), 1u);
    EXPECT_EQ(p.accounting[0].at, "end");
  }
}

// The owners named are the context, the GPU libraries the Module records show loaded and, with
// stream-ordered allocations, their pools.
TEST(Accounting, LikelyOwnersAreTheContextAndTheLoadedGpuLibraries) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.module("/usr/lib/libnccl.so.2", 0x10000000, 0x1000);
  t.module("/usr/lib/libcublas.so.12", 0x20000000, 0x1000);
  t.module("/usr/lib/libcublasLt.so.12", 0x30000000, 0x1000);
  t.module("/opt/cudnn/lib/libcudnn_ops.so.9", 0x40000000, 0x1000);
  t.module("/opt/cudnn/lib/libcudnn.so.9", 0x50000000, 0x1000);
  t.module("/usr/lib/libnvidia-ml.so.1", 0x60000000, 0x1000);  // the shim's sampler: no owner
  t.alloc(0xa000000, 100 * MiB, 1);
  t.alloc(0xc000000, 1 * MiB, 1, gf::Api::kCudaMallocAsync, gf::MemoryKind::kPool);
  t.process_memory(101 * MiB + kContext, 1ull << 30, kTotal);
  t.end();
  const an::ProcessReport p = analyze(t, dir);
  ASSERT_EQ(p.accounting.size(), 1u);
  EXPECT_EQ(p.accounting[0].not_explained_bytes, kContext);
  EXPECT_EQ(p.accounting[0].likely_owners,
            (std::vector<std::string>{"CUDA context", "cuBLASLt", "cuBLAS", "cuDNN", "NCCL",
                                      "memory pools (cudaMallocAsync)"}));
}

// Without this pid in NVML's list (another pid namespace) the view is the whole device's, which
// holds other processes too; without NVML, cudaMemGetInfo's total - free, also the whole device's.
TEST(Accounting, DeviceWideViewsAreMarkedAndNameOtherProcesses) {
  TempDir dir;
  {
    TraceBuilder t = base_trace();
    t.alloc(0xa000000, 100 * MiB, 1);
    t.meminfo(kTotal - 5000 * MiB, kTotal);  // a worse view than NVML's: not used
    t.process_memory(-1, 2000 * MiB, kTotal);
    t.end();
    const an::ProcessReport p = analyze(t, dir);
    ASSERT_EQ(p.accounting.size(), 1u);
    const an::AccountingPoint& a = p.accounting[0];
    EXPECT_EQ(a.source, "nvml_device");
    EXPECT_TRUE(a.device_wide);
    EXPECT_EQ(a.device_view_bytes, static_cast<uint64_t>(2000 * MiB));
    EXPECT_EQ(a.not_explained_bytes, 1900 * MiB);
    EXPECT_EQ(a.likely_owners, (std::vector<std::string>{"CUDA context", "other processes"}));
  }
  {
    TraceBuilder t = base_trace();
    t.alloc(0xa000000, 100 * MiB, 1);
    t.meminfo(kTotal - 1000 * MiB, kTotal);
    t.end();
    const an::ProcessReport p = analyze(t, dir);
    ASSERT_EQ(p.accounting.size(), 1u);
    EXPECT_EQ(p.accounting[0].source, "meminfo");
    EXPECT_TRUE(p.accounting[0].device_wide);
    EXPECT_EQ(p.accounting[0].not_explained_bytes, 900 * MiB);
  }
  {  // this process's own figure wins over the device-wide ones, whichever came last
    TraceBuilder t = base_trace();
    t.alloc(0xa000000, 100 * MiB, 1);
    t.process_memory(100 * MiB + kContext, 2000 * MiB, kTotal);
    t.process_memory(-1, 2000 * MiB, kTotal);
    t.meminfo(kTotal - 1000 * MiB, kTotal);
    t.end();
    const an::ProcessReport p = analyze(t, dir);
    ASSERT_EQ(p.accounting.size(), 1u);
    EXPECT_EQ(p.accounting[0].source, "nvml");
    EXPECT_EQ(p.accounting[0].not_explained_bytes, kContext);
  }
}

// No view of the device, no claim: no point, no text line, an empty JSON list.
TEST(Accounting, NothingIsClaimedWithoutADeviceView) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0xa000000, 100 * MiB, 1);
  t.end();
  std::string path = t.write(dir.file("t.trace"));
  an::Report r = an::analyze({path});
  EXPECT_TRUE(r.processes.at(0).accounting.empty());
  EXPECT_EQ(an::report_text(r).find("not explained"), std::string::npos);
  EXPECT_EQ(an::report_text(r).find("device view"), std::string::npos);
  EXPECT_EQ(an::report_json(r)["processes"][0]["accounting"], nlohmann::json::array());
}

// A view below what the trace holds (managed memory not resident, a sample racing an allocation)
// is shown as such, with no owners.
TEST(Accounting, ATraceThatCountsMoreIsShownAsSuch) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0xa000000, 100 * MiB, 1);
  t.process_memory(60 * MiB, 1ull << 30, kTotal);
  t.end();
  an::Report r = an::analyze({t.write(dir.file("t.trace"))});
  const an::AccountingPoint& a = r.processes.at(0).accounting.at(0);
  EXPECT_EQ(a.not_explained_bytes, -40 * MiB);
  EXPECT_TRUE(a.likely_owners.empty());
  std::vector<std::string> lines = accounting_lines(an::report_text(r));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(
                "= 100.00 MiB traced - 40.00 MiB the trace counts that the device does not show"),
            std::string::npos)
      << lines[0];
}

// Each device compares its own view with its own traced bytes; an OOM gets the device's last view.
TEST(Accounting, PerDeviceAndBeforeEachOom) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0xa000000, 100 * MiB, 1, gf::Api::kCudaMalloc, gf::MemoryKind::kDevice, 0);
  t.alloc(0xb000000, 30 * MiB, 1, gf::Api::kCudaMalloc, gf::MemoryKind::kDevice, 1);
  t.process_memory(30 * MiB + kContext, 1ull << 30, kTotal, 1);
  t.failed(8ull << 30, 2);  // out of memory (device 0 in the builder): no view of device 0
  gf::AllocFailedRecord oom;
  oom.time_ns = t.now() + 1000;
  oom.thread_id = 1;
  oom.device = 1;
  oom.api = gf::Api::kCudaMalloc;
  oom.kind = gf::MemoryKind::kDevice;
  oom.size = 8ull << 30;
  oom.error = 2;
  t.add(oom);
  oom.time_ns += 1000;
  oom.error = 1;  // not out of memory: no point
  t.add(oom);
  t.at(oom.time_ns + 1000).end();
  const an::ProcessReport p = analyze(t, dir);
  ASSERT_EQ(p.accounting.size(), 2u);
  EXPECT_EQ(p.accounting[0].at, "end");
  EXPECT_EQ(p.accounting[0].device, 1);
  EXPECT_EQ(p.accounting[0].traced_bytes, static_cast<uint64_t>(30 * MiB));
  EXPECT_EQ(p.accounting[0].not_explained_bytes, kContext);
  EXPECT_EQ(p.accounting[1].at, "oom");
  EXPECT_EQ(p.accounting[1].device, 1);
  EXPECT_EQ(p.accounting[1].not_explained_bytes, kContext);
}

// The samples are not the program's events: every other finding is what it is without them.
TEST(Accounting, SamplesChangeNoOtherFinding) {
  TempDir dir;
  auto build = [](bool samples) {
    TraceBuilder t = base_trace();
    for (uint64_t i = 0; i < 40; ++i) {
      t.at(1'000'000 * (i + 1)).alloc(0x1000000 + (i << 24), 1 * MiB, 1);
      if (samples)
        t.process_memory(static_cast<int64_t>(i + 1) * MiB + kContext, 1ull << 30, kTotal);
    }
    if (samples)  // long after the last event
      for (uint64_t i = 0; i < 40; ++i)
        t.at(100'000'000 + i * 50'000'000).process_memory(kContext, 1, kTotal);
    t.at(3'000'000'000).end();
    return t;
  };
  TraceBuilder with = build(true), without = build(false);
  an::Report a = an::analyze({with.write(dir.file("a.trace"))});
  an::Report b = an::analyze({without.write(dir.file("b.trace"))});
  nlohmann::json ja = an::report_json(a), jb = an::report_json(b);
  EXPECT_FALSE(ja["processes"][0]["accounting"].empty());
  for (nlohmann::json* j : {&ja, &jb}) {
    for (const char* key : {"trace", "trace_bytes", "accounting"}) (*j)["processes"][0].erase(key);
    (*j)["processes"][0]["integrity"].erase("blocks");  // the samples take a block more
  }
  EXPECT_EQ(ja.dump(), jb.dump());
}

// The three renderings of one point: the line a user compares with nvidia-smi, JSON, HTML.
TEST(Accounting, TextJsonAndHtml) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.module("/usr/lib/libcublas.so.12", 0x20000000, 0x1000);
  t.alloc(0xa000000, 100 * MiB, 1);
  t.at(2'500'000'000).process_memory(100 * MiB + kContext, 1ull << 30, kTotal);
  t.end();
  an::Report r = an::analyze({t.write(dir.file("t.trace"))});
  std::vector<std::string> lines = accounting_lines(an::report_text(r));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(
      lines[0],
      "device view at the end, device 0 (NVML, this process, 2.500 s): 400.00 MiB = 100.00 MiB "
      "traced "
      "+ 300.00 MiB not explained (CUDA context; cuBLAS loaded); nvidia-smi: 400 MiB for this pid");
  nlohmann::json j = an::report_json(r)["processes"][0]["accounting"];
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["at"], "end");
  EXPECT_EQ(j[0]["source"], "nvml");
  EXPECT_EQ(j[0]["device_wide"], false);
  EXPECT_EQ(j[0]["device_view_bytes"], 400 * MiB);
  EXPECT_EQ(j[0]["traced_bytes"], 100 * MiB);
  EXPECT_EQ(j[0]["not_explained_bytes"], kContext);
  EXPECT_EQ(j[0]["device_total_bytes"], kTotal);
  EXPECT_EQ(j[0]["likely_owners"], (nlohmann::json{"CUDA context", "cuBLAS"}));
  EXPECT_DOUBLE_EQ(j[0]["time_s"].get<double>(), 2.5);
  const std::string html = an::report_html(r);
  EXPECT_NE(html.find("<th>not explained</th>"), std::string::npos);
  EXPECT_NE(html.find("CUDA context; cuBLAS loaded"), std::string::npos);
  EXPECT_NE(html.find("title=\"314572800 bytes\">300.00 MiB"), std::string::npos);
}

// Sizes near 2^64 (a damaged or hostile trace) give a difference held to int64_t's range, not an
// overflow (found by the fuzz target).
TEST(Accounting, HugeSizesDoNotOverflowTheDifference) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0xa000000, 0x8000000000004e00ull, 1);  // more than INT64_MAX bytes "traced"
  t.process_memory(80 * 1024 * MiB, 1ull << 30, kTotal);
  t.end();
  const an::ProcessReport p = analyze(t, dir);
  ASSERT_FALSE(p.accounting.empty());
  const uint64_t over = 0x8000000000004e00ull - static_cast<uint64_t>(80 * 1024 * MiB);
  EXPECT_EQ(p.accounting[0].not_explained_bytes, -static_cast<int64_t>(over));
  EXPECT_TRUE(p.accounting[0].likely_owners.empty());
}

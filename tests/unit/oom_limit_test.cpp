// OOMs judged by what stopped them (analyzer/findings/fragmentation.cpp, memory_limit.h): the
// process's own memory-fraction cap, fragmentation measured in the cache, or a full device; and
// the advice each gets.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "findings/memory_limit.h"
#include "gpumemshim/analyzer/analyze.h"
#include "gpumemshim/analyzer/render.h"
#include "gpumemshim/analyzer/report.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace an = gpumemshim::analyzer;
namespace gf = gpumemshim::format;
using gpumemshim::testing::TempDir;
using gpumemshim::testing::TraceBuilder;

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kSeg = 0x7f0000000000ull;
// An H200 as a process sees it, capped at 3 % by set_per_process_memory_fraction(0.03).
constexpr uint64_t kH200 = 150'121'938'944ull;
constexpr uint64_t kCap = 4'503'658'168ull;  // 0.03 x kH200
constexpr uint64_t kReserved = 2147 * 2 * kMiB;
constexpr uint64_t kFreeInCache = 2'652'160;  // 2.53 MiB
constexpr uint64_t kDeviceFree = 144'800'000'000ull;

an::Report analyze(const TraceBuilder& t, const TempDir& dir) {
  return an::analyze({t.write(dir.file("t.trace"))});
}

bool has_advice(const an::ProcessReport& p, const std::string& id) {
  return std::any_of(p.advice.begin(), p.advice.end(),
                     [&](const an::Advice& a) { return a.id == id; });
}

// The caching allocator at 4.19 GiB reserved, all but 2.53 MiB of it allocated, asking 32 MiB
// while the device has 144.8 GB free: what the user's capped benchmark hit.
// With the attribute key = value that gives the cap, if any.
TraceBuilder capped_oom(const char* key = nullptr, const std::string& value = {}) {
  TraceBuilder t;
  t.process(7, "bench");
  t.device(0, kH200, "NVIDIA H200");
  if (key) t.add(gf::AttributeRecord{key, value});
  t.alloc(kSeg, kReserved);
  t.torch(gf::TorchAction::kSegmentAlloc, kSeg, kReserved);
  t.torch(gf::TorchAction::kAlloc, kSeg, kReserved - kFreeInCache);
  t.torch(gf::TorchAction::kOom, kDeviceFree, 32 * kMiB);
  t.end();
  return t;
}

const an::OomFinding& only_oom(const an::Report& r) {
  const auto& frag = r.processes.at(0).fragmentation;
  EXPECT_EQ(frag.size(), 1u);
  EXPECT_EQ(frag.at(0).ooms.size(), 1u);
  return frag.at(0).ooms.at(0);
}

}  // namespace

TEST(OomLimit, TheMemoryFractionCapIsTheVerdictNotFragmentation) {
  TempDir dir;
  an::Report r = analyze(capped_oom("torch.memory_fraction.0", "0.03"), dir);
  const an::OomFinding& o = only_oom(r);
  EXPECT_EQ(o.cause, "memory_limit");
  EXPECT_FALSE(o.enough_total_free);  // within the cap only ~1 MiB could still be had
  EXPECT_EQ(o.limit_bytes, kCap);
  EXPECT_DOUBLE_EQ(o.memory_fraction, 0.03);
  EXPECT_EQ(o.verdict,
            "the process's memory-fraction cap of 3% (4.19 GiB of 139.81 GiB) was reached: "
            "reserved 4.19 GiB, "
            "2.53 MiB free in the cache, 32.00 MiB asked (the device had 134.86 GiB free)");
  const an::ProcessReport& p = r.processes.at(0);
  EXPECT_EQ(p.fragmentation.at(0).limit_bytes, kCap);
  EXPECT_TRUE(has_advice(p, "raise-memory-fraction"));
  EXPECT_FALSE(has_advice(p, "expandable-segments"));
  EXPECT_FALSE(has_advice(p, "max-split-size"));
  auto json = an::report_json(r);
  const auto& oom = json["fragmentation"]["per_device"][0]["ooms"][0];
  EXPECT_EQ(oom["cause"], "memory_limit");
  EXPECT_EQ(oom["limit_bytes"], kCap);
  EXPECT_DOUBLE_EQ(oom["memory_fraction"].get<double>(), 0.03);
}

// The same OOM when the trace does not know the cap: the device had room, the cache had none;
// nothing measured says fragmentation, so no allocator settings are advised.
TEST(OomLimit, FreeDeviceMemoryAloneIsNotFragmentation) {
  TempDir dir;
  an::Report r = analyze(capped_oom(), dir);
  const an::OomFinding& o = only_oom(r);
  EXPECT_EQ(o.cause, "unexplained");
  EXPECT_TRUE(o.enough_total_free);
  EXPECT_EQ(o.limit_bytes, 0u);
  const an::ProcessReport& p = r.processes.at(0);
  EXPECT_FALSE(has_advice(p, "expandable-segments"));
  EXPECT_FALSE(has_advice(p, "raise-memory-fraction"));
}

TEST(OomLimit, TheAllocatorsOwnCapIsUsedWhenGiven) {
  TempDir dir;
  an::Report r = analyze(capped_oom("torch.allowed_bytes.0", std::to_string(kCap)), dir);
  const an::OomFinding& o = only_oom(r);
  EXPECT_EQ(o.cause, "memory_limit");
  EXPECT_EQ(o.limit_bytes, kCap);
  EXPECT_EQ(o.memory_fraction, 0.0);
  EXPECT_EQ(o.verdict.rfind("the process's memory cap of 4.19 GiB was reached", 0), 0u)
      << o.verdict;
}

// Ten 2 MiB blocks in a 20 MiB segment, every other one freed: 10 MiB free in the cache, none of it
// in one piece of the 4 MiB asked; the device has 1 MiB free. Under no cap, or one not reached.
TEST(OomLimit, FragmentationKeepsItsAdvice) {
  for (const char* fraction : {static_cast<const char*>(nullptr), "0.5"}) {
    SCOPED_TRACE(fraction ? fraction : "no cap");
    TempDir dir;
    TraceBuilder t;
    t.process(7, "train");
    t.device(0, 1024 * kMiB);
    if (fraction) t.add(gf::AttributeRecord{"torch.memory_fraction.0", fraction});
    t.alloc(kSeg, 20 * kMiB);
    t.torch(gf::TorchAction::kSegmentAlloc, kSeg, 20 * kMiB);
    for (uint64_t i = 0; i < 10; ++i)
      t.torch(gf::TorchAction::kAlloc, kSeg + i * 2 * kMiB, 2 * kMiB);
    for (uint64_t i = 0; i < 10; i += 2)
      t.torch(gf::TorchAction::kFreeCompleted, kSeg + i * 2 * kMiB, 2 * kMiB);
    t.torch(gf::TorchAction::kOom, 1 * kMiB, 4 * kMiB);
    t.end();
    an::Report r = analyze(t, dir);
    const an::OomFinding& o = only_oom(r);
    EXPECT_EQ(o.cause, "fragmentation");
    EXPECT_EQ(o.verdict,
              "10.00 MiB free in the cache would have held the 4.00 MiB asked, but its largest "
              "free block "
              "was 2.00 MiB: fragmentation");
    const an::ProcessReport& p = r.processes.at(0);
    EXPECT_TRUE(has_advice(p, "expandable-segments"));
    EXPECT_TRUE(has_advice(p, "max-split-size"));
    EXPECT_FALSE(has_advice(p, "raise-memory-fraction"));
  }
}

TEST(OomLimit, ARuntimeOomOnAFullDevice) {
  TempDir dir;
  TraceBuilder t;
  t.process(7, "app");
  gf::MemInfoRecord m;
  m.device = 0;
  m.free_bytes = 1 * kMiB;
  m.total_bytes = 64 * kMiB;
  t.add(m);
  t.alloc(0x1000, 60 * kMiB);
  t.failed(8 * kMiB);
  t.end();
  an::Report r = analyze(t, dir);
  const an::OomFinding& o = only_oom(r);
  EXPECT_EQ(o.cause, "device_full");
  EXPECT_EQ(o.verdict, "the device had 1.00 MiB free, less than the 8.00 MiB asked");
}

TEST(MemoryLimit, FromTheAttributes) {
  using Attributes = std::vector<std::pair<std::string, std::string>>;
  constexpr uint64_t kTotal = 1000 * kMiB;
  an::MemoryLimit none = an::memory_limit({}, 0, kTotal);
  EXPECT_FALSE(none.known());
  // The last value counts; another device's does not.
  an::MemoryLimit l = an::memory_limit(Attributes{{"torch.memory_fraction.0", "0.5"},
                                                  {"torch.memory_fraction.1", "0.1"},
                                                  {"torch.memory_fraction.0", "0.25"}},
                                       0, kTotal);
  EXPECT_EQ(l.bytes, 250 * kMiB);
  EXPECT_DOUBLE_EQ(l.fraction, 0.25);
  // No cap: a fraction of 1, a value that is not a number, no device total.
  EXPECT_FALSE(an::memory_limit(Attributes{{"torch.memory_fraction.0", "1.0"}}, 0, kTotal).known());
  EXPECT_FALSE(
      an::memory_limit(Attributes{{"torch.memory_fraction.0", "half"}}, 0, kTotal).known());
  EXPECT_FALSE(an::memory_limit(Attributes{{"torch.memory_fraction.0", "0.5"}}, 0, 0).known());
  // The allocator's own figure wins; the device total it reports without a cap is none.
  EXPECT_EQ(an::memory_limit(Attributes{{"torch.memory_fraction.0", "0.5"},
                                        {"torch.allowed_bytes.0", "524288000"}},
                             0, kTotal)
                .bytes,
            500 * kMiB);
  EXPECT_FALSE(
      an::memory_limit(Attributes{{"torch.allowed_bytes.0", std::to_string(kTotal)}}, 0, kTotal)
          .known());
  EXPECT_FALSE(an::memory_limit(Attributes{{"torch.allowed_bytes.0", "1048576"}}, 0, 0).known());
}

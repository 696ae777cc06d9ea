// Memory by category (analyzer/findings/categories.h) on synthesized traces: tags, the backward
// passes' activations, the allocator's cache, memory outside PyTorch, OOMs, windows, and the
// writers that show them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpumemshim/analyzer/analyze.h"
#include "gpumemshim/analyzer/render.h"
#include "replay/load.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace an = gpumemshim::analyzer;
namespace gf = gpumemshim::format;
using an::MemoryCategory;
using gpumemshim::testing::TempDir;
using gpumemshim::testing::TraceBuilder;

namespace {

constexpr uint64_t MiB = 1 << 20;
constexpr uint64_t kAppBase = 0x400000;
constexpr uint64_t kSegment = 0x7f0000000000ull;
constexpr uint8_t kParameter = 1, kGradient = 2, kOptimizerState = 3, kActivation = 4;

TraceBuilder base_trace() {
  TraceBuilder t;
  t.process(9, "train.py");
  t.module("/nonexistent/bin/app", kAppBase, 0x10000);
  t.device(0, 80ull << 30, "Fake GPU");
  t.stack(1, {kAppBase + 0x1000});
  t.stack(2, {kAppBase + 0x2000});
  t.stack(3, {kAppBase + 0x3000});
  return t;
}

// A segment of PyTorch's allocator: the runtime allocation and the bridge's event for it.
void segment(TraceBuilder& t, uint64_t address, uint64_t size) {
  t.alloc(address, size);
  t.torch(gf::TorchAction::kSegmentAlloc, address, size);
}
void block(TraceBuilder& t, uint64_t address, uint64_t size, uint64_t stack = 1) {
  t.torch(gf::TorchAction::kAlloc, address, size, stack);
}
void release(TraceBuilder& t, uint64_t address) {
  t.torch(gf::TorchAction::kFreeCompleted, address, 0);
}
void tag(TraceBuilder& t, uint64_t address, uint8_t category) {
  t.torch(gf::TorchAction::kTag, address, category);
}
void backward(TraceBuilder& t, bool push) {
  t.marker(push ? gf::MarkerKind::kRangePush : gf::MarkerKind::kRangePop, "torch.backward");
}

an::ProcessReport analyze(const TraceBuilder& t, const TempDir& dir) {
  an::Report r = an::analyze({t.write(dir.file("t.trace"))});
  return r.processes.at(0);
}

uint64_t at(const an::CategoryBytes& c, MemoryCategory k) {
  return c.of(k);
}

// One step: a context allocation outside PyTorch, a 16 MiB segment holding a parameter, its
// gradient, optimizer state and a temporary, each tagged (the temporary not).
TraceBuilder one_step(bool tagged = true) {
  TraceBuilder t = base_trace();
  t.alloc(0x1000, 3 * MiB, 2);  // e.g. the CUDA context's or cuBLAS's: outside PyTorch
  segment(t, kSegment, 16 * MiB);
  block(t, kSegment, 4 * MiB);
  block(t, kSegment + 4 * MiB, 4 * MiB);
  block(t, kSegment + 8 * MiB, 2 * MiB);
  block(t, kSegment + 10 * MiB, 1 * MiB);
  if (tagged) {
    tag(t, kSegment, kParameter);
    tag(t, kSegment + 4 * MiB, kGradient);
    tag(t, kSegment + 8 * MiB, kOptimizerState);
  }
  release(t, kSegment + 10 * MiB);
  t.marker(gf::MarkerKind::kStep, "optimizer.step");
  t.end();
  return t;
}

}  // namespace

TEST(Categories, AtThePeakTheyAddUpToThePeak) {
  TempDir dir;
  an::ProcessReport p = analyze(one_step(), dir);
  ASSERT_TRUE(p.categories);
  const an::CategoryBytes& c = p.categories->peak;
  EXPECT_TRUE(p.categories->tagged);
  EXPECT_EQ(p.categories->tags, 3u);
  EXPECT_EQ(at(c, MemoryCategory::kParameter), 4 * MiB);
  EXPECT_EQ(at(c, MemoryCategory::kGradient), 4 * MiB);
  EXPECT_EQ(at(c, MemoryCategory::kOptimizerState), 2 * MiB);
  EXPECT_EQ(at(c, MemoryCategory::kActivation), 0u);
  EXPECT_EQ(at(c, MemoryCategory::kTemporary), 1 * MiB);  // untagged: a temporary
  // The cache is reserved - allocated: 16 MiB of segment, 11 MiB of blocks at the peak.
  EXPECT_EQ(at(c, MemoryCategory::kAllocatorCache), 5 * MiB);
  // Outside PyTorch: device memory that is no segment of its allocator.
  EXPECT_EQ(at(c, MemoryCategory::kOutsideTorch), 3 * MiB);
  EXPECT_EQ(c.total(), p.summary.peak_bytes);
  EXPECT_FALSE(c.has_not_explained);
}

TEST(Categories, UntaggedBlocksAreTemporaries) {
  TempDir dir;
  an::ProcessReport p = analyze(one_step(/*tagged=*/false), dir);
  ASSERT_TRUE(p.categories);
  EXPECT_FALSE(p.categories->tagged);
  const an::CategoryBytes& c = p.categories->peak;
  EXPECT_EQ(at(c, MemoryCategory::kTemporary), 11 * MiB);
  EXPECT_EQ(at(c, MemoryCategory::kParameter) + at(c, MemoryCategory::kGradient), 0u);
  EXPECT_EQ(c.total(), p.summary.peak_bytes);
}

TEST(Categories, NoneWithoutTorchEvents) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0x1000, MiB);
  t.end();
  EXPECT_FALSE(analyze(t, dir).categories);
}

// A tag counts from the block's allocation: a parameter told after the peak was one at the peak.
TEST(Categories, ALateTagCountsAtThePeakBeforeIt) {
  TempDir dir;
  TraceBuilder t = base_trace();
  segment(t, kSegment, 8 * MiB);
  block(t, kSegment, 4 * MiB);
  block(t, kSegment + 4 * MiB, 4 * MiB);  // the peak: 8 MiB of blocks
  release(t, kSegment + 4 * MiB);
  t.free(kSegment);  // down from the peak (the segment back to the device)
  t.alloc(0x9000000, MiB);
  tag(t, kSegment, kParameter);  // after the peak, the block still alive
  t.end();
  an::ProcessReport p = analyze(t, dir);
  ASSERT_TRUE(p.categories);
  EXPECT_EQ(at(p.categories->peak, MemoryCategory::kParameter), 4 * MiB);
  EXPECT_EQ(at(p.categories->peak, MemoryCategory::kTemporary), 4 * MiB);
}

// A tag names the block live at its address: a freed block's tag does not pass to the next block
// there, and a tag for no live block is counted and dropped.
TEST(Categories, AReusedAddressDoesNotKeepAnOldTag) {
  TempDir dir;
  TraceBuilder t = base_trace();
  segment(t, kSegment, 8 * MiB);
  block(t, kSegment, 2 * MiB);
  tag(t, kSegment, kGradient);
  release(t, kSegment);
  tag(t, kSegment, kGradient);  // nothing lives there now
  block(t, kSegment, 6 * MiB);  // the same address, a new block: the peak
  t.end();
  an::ProcessReport p = analyze(t, dir);
  ASSERT_TRUE(p.categories);
  EXPECT_EQ(at(p.categories->peak, MemoryCategory::kGradient), 0u);
  EXPECT_EQ(at(p.categories->peak, MemoryCategory::kTemporary), 6 * MiB);
  EXPECT_EQ(p.categories->tags, 2u);
  EXPECT_EQ(p.categories->unmatched_tags, 1u);
}

// A parameter saved for backward stays a parameter; a later writer's category is ignored.
TEST(Categories, ParameterOutranksOtherTags) {
  TempDir dir;
  TraceBuilder t = base_trace();
  segment(t, kSegment, 8 * MiB);
  block(t, kSegment, 4 * MiB);
  tag(t, kSegment, kParameter);
  tag(t, kSegment, kActivation);
  tag(t, kSegment, 77);
  t.end();
  an::ProcessReport p = analyze(t, dir);
  EXPECT_EQ(at(p.categories->peak, MemoryCategory::kParameter), 4 * MiB);
  EXPECT_EQ(at(p.categories->peak, MemoryCategory::kActivation), 0u);
}

// The forward's blocks alive when backward starts and freed before the next backward are
// activations, from their allocation on (the peak at the end of the forward counts them); one
// that outlives the next backward (a buffer made during the forward) stays a temporary, and so
// does a block allocated and freed within the forward.
TEST(Categories, ActivationsFromTheBackwardPasses) {
  TempDir dir;
  TraceBuilder t = base_trace();
  segment(t, kSegment, 64 * MiB);
  block(t, kSegment, 8 * MiB);  // the weights, told as such
  tag(t, kSegment, kParameter);
  block(t, kSegment + 40 * MiB, 2 * MiB);  // before this forward: not its activation
  t.marker(gf::MarkerKind::kStep, "optimizer.step");
  block(t, kSegment + 8 * MiB, 2 * MiB);      // forward: a temporary, freed in the forward
  block(t, kSegment + 10 * MiB, 4 * MiB, 2);  // forward: saved for backward
  block(t, kSegment + 14 * MiB, 4 * MiB, 3);  // forward: a buffer kept for good
  release(t, kSegment + 8 * MiB);
  block(t, kSegment + 20 * MiB, 1 * MiB);  // the end of the forward
  release(t, kSegment + 20 * MiB);
  backward(t, true);
  block(t, kSegment + 24 * MiB, 8 * MiB);  // the gradient, allocated in backward
  release(t, kSegment + 10 * MiB);         // the saved tensor freed by backward
  release(t, kSegment + 40 * MiB);
  backward(t, false);
  tag(t, kSegment + 24 * MiB, kGradient);
  t.marker(gf::MarkerKind::kStep, "optimizer.step");
  backward(t, true);  // the next backward: the kept buffer outlived it
  release(t, kSegment + 14 * MiB);  // freed later: still not an activation
  backward(t, false);
  t.end();
  an::ProcessReport p = analyze(t, dir);
  ASSERT_TRUE(p.categories);
  const an::CategoryBytes& c = p.categories->peak;
  // The peak, in backward, holds the weights, the gradient, the saved tensor and the kept buffer.
  EXPECT_EQ(at(c, MemoryCategory::kParameter), 8 * MiB);
  EXPECT_EQ(at(c, MemoryCategory::kGradient), 8 * MiB);
  EXPECT_EQ(at(c, MemoryCategory::kActivation), 4 * MiB);
  EXPECT_EQ(at(c, MemoryCategory::kTemporary), 6 * MiB);  // the kept buffer, the earlier block
  // The first step's window peaked at the same moment: its activation counted there too.
  const std::vector<an::CategoryWindow>& w = p.categories->windows;
  ASSERT_EQ(p.categories->basis, "steps");
  ASSERT_GE(w.size(), 2u);
  EXPECT_EQ(w[1].first, 1u);
  EXPECT_EQ(at(w[1].at_peak, MemoryCategory::kActivation), 4 * MiB);
  // The activation's site at the peak.
  bool found = false;
  for (const an::CategorySite& s : p.categories->peak_sites)
    if (s.category == MemoryCategory::kActivation) {
      found = true;
      EXPECT_EQ(s.bytes, 4 * MiB);
      ASSERT_FALSE(s.stack.empty());
      EXPECT_EQ(s.stack[0].pc, kAppBase + 0x2000);
    }
  EXPECT_TRUE(found);
}

// At an OOM: the categories of that device, and how much of the device's used memory the trace
// does not explain (total - the OOM's free bytes - live device memory).
TEST(Categories, AtTheOom) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0x1000, 2 * MiB, 2);
  segment(t, kSegment, 8 * MiB);
  block(t, kSegment, 4 * MiB);
  tag(t, kSegment, kParameter);
  block(t, kSegment + 4 * MiB, 2 * MiB);
  t.failed(64 * MiB);  // the cudaMalloc under the OOM: the torch OOM says more
  const uint64_t free = (80ull << 30) - 10 * MiB - 512 * MiB;  // 512 MiB not seen by the trace
  t.torch(gf::TorchAction::kOom, free, 64 * MiB);
  t.end();
  an::ProcessReport p = analyze(t, dir);
  ASSERT_TRUE(p.categories);
  ASSERT_EQ(p.categories->ooms.size(), 1u);
  const an::CategoryOom& o = p.categories->ooms[0];
  EXPECT_TRUE(o.torch);
  EXPECT_EQ(o.device, 0);
  EXPECT_EQ(o.requested, 64 * MiB);
  EXPECT_EQ(at(o.at, MemoryCategory::kParameter), 4 * MiB);
  EXPECT_EQ(at(o.at, MemoryCategory::kTemporary), 2 * MiB);
  EXPECT_EQ(at(o.at, MemoryCategory::kAllocatorCache), 2 * MiB);
  EXPECT_EQ(at(o.at, MemoryCategory::kOutsideTorch), 2 * MiB);
  ASSERT_TRUE(o.at.has_not_explained);
  EXPECT_EQ(o.at.not_explained, 512 * MiB);
  // The text report shows it under the OOM.
  an::Report r;
  r.processes.push_back(p);
  std::string text = an::report_text(r);
  EXPECT_NE(text.find("by category: parameters 4.00 MiB"), std::string::npos) << text;
}

TEST(Categories, RuntimeOomWithoutTorchOom) {
  TempDir dir;
  TraceBuilder t = base_trace();
  segment(t, kSegment, 8 * MiB);
  block(t, kSegment, 4 * MiB);
  t.failed(64 * MiB);
  t.end();
  an::ProcessReport p = analyze(t, dir);
  ASSERT_EQ(p.categories->ooms.size(), 1u);
  EXPECT_FALSE(p.categories->ooms[0].torch);
  EXPECT_EQ(at(p.categories->ooms[0].at, MemoryCategory::kTemporary), 4 * MiB);
}

// A cudaMemGetInfo sample: device used beyond what the trace saw (the context, other processes'
// share of nothing here) is shown apart from the categories.
TEST(Categories, NotExplainedFromMemInfo) {
  TempDir dir;
  TraceBuilder t = base_trace();
  segment(t, kSegment, 8 * MiB);
  gf::MemInfoRecord m;
  m.time_ns = t.now() + 1000;
  m.device = 0;
  m.total_bytes = 80ull << 30;
  m.free_bytes = m.total_bytes - 8 * MiB - 300 * MiB;
  t.add(m);
  t.at(m.time_ns + 1000);
  block(t, kSegment, 4 * MiB);
  t.end();
  an::ProcessReport p = analyze(t, dir);
  ASSERT_TRUE(p.categories->peak.has_not_explained);
  EXPECT_EQ(p.categories->peak.not_explained, 300 * MiB);
}

// Each step's highest point; a tag in the middle counts in every window the block lived in, however
// many windows were merged before and after it.
TEST(Categories, WindowsPerStepMergedWhenMany) {
  TempDir dir;
  TraceBuilder t = base_trace();
  segment(t, kSegment, 64 * MiB);
  block(t, kSegment, 4 * MiB);  // a parameter, told only at the very end
  const size_t steps = 3 * an::kMaxCategoryWindows + 7;
  for (size_t i = 0; i < steps; ++i) {
    const uint64_t size = (i == 1000 ? 40 : 1 + i % 3) * MiB;
    block(t, kSegment + 8 * MiB, size);
    release(t, kSegment + 8 * MiB);
    t.marker(gf::MarkerKind::kStep, "optimizer.step");
    if (i == an::kMaxCategoryWindows + 100)
      tag(t, kSegment, kParameter);  // merges before and after
  }
  t.end();
  an::ProcessReport p = analyze(t, dir);
  const std::vector<an::CategoryWindow>& w = p.categories->windows;
  ASSERT_EQ(p.categories->basis, "steps");
  ASSERT_LE(w.size(), an::kMaxCategoryWindows);
  ASSERT_GE(w.size(), an::kMaxCategoryWindows / 4);
  EXPECT_EQ(w.front().first, 0u);
  EXPECT_EQ(w.back().last, steps);
  uint64_t highest = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (i > 0) {
      EXPECT_EQ(w[i].first, w[i - 1].last + 1);
    }
    EXPECT_EQ(at(w[i].at_peak, MemoryCategory::kParameter), 4 * MiB) << i;
    highest = std::max(highest, at(w[i].at_peak, MemoryCategory::kTemporary));
  }
  EXPECT_EQ(highest, 40 * MiB);  // the one big step survives the merges
  EXPECT_EQ(at(p.categories->peak, MemoryCategory::kTemporary), 40 * MiB);
}

// Without step markers: windows of time.
TEST(Categories, WindowsOfTimeWithoutSteps) {
  TempDir dir;
  TraceBuilder t = base_trace();
  segment(t, kSegment, 64 * MiB);
  for (int i = 0; i < 50; ++i) {
    t.at(uint64_t{20'000'000} * static_cast<uint64_t>(i + 1));
    block(t, kSegment, MiB * static_cast<uint64_t>(1 + i % 5));
    release(t, kSegment);
  }
  t.end();
  an::ProcessReport p = analyze(t, dir);
  EXPECT_EQ(p.categories->basis, "time");
  ASSERT_GE(p.categories->windows.size(), 10u);
  for (const an::CategoryWindow& w : p.categories->windows) EXPECT_LT(w.first, w.last);
}

TEST(Categories, WritersShowThem) {
  TempDir dir;
  an::Report r = an::analyze({one_step().write(dir.file("t.trace"))});
  nlohmann::json j = an::report_json(r);
  const nlohmann::json& c = j["processes"][0]["categories"];
  EXPECT_EQ(c["peak"]["bytes"]["parameter"], 4 * MiB);
  EXPECT_EQ(c["peak"]["bytes"]["allocator_cache"], 5 * MiB);
  EXPECT_EQ(c["peak"]["bytes"]["outside_torch"], 3 * MiB);
  EXPECT_EQ(c["peak"]["total_bytes"], 19 * MiB);
  EXPECT_TRUE(c["peak"]["not_explained_bytes"].is_null());
  EXPECT_EQ(c["basis"], "steps");
  EXPECT_TRUE(c["tagged"]);
  ASSERT_FALSE(c["windows"].empty());
  EXPECT_EQ(c["windows"][0]["first_step"], 0);
  std::string text = an::report_text(r);
  EXPECT_NE(text.find("memory by category at the peak (19.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("parameters 4.00 MiB, gradients 4.00 MiB, optimizer state 2.00 MiB"),
            std::string::npos)
      << text;
  std::string html = an::report_html(r);
  EXPECT_NE(html.find("<h3>Memory by category</h3>"), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"chart categories\""), std::string::npos);
  EXPECT_NE(html.find("step 0: parameters 4.00 MiB"), std::string::npos);
}

// A block's category is what consumers of the replay read with its live record.
TEST(Categories, LiveBlocksCarryTheirCategory) {
  TempDir dir;
  an::LoadedTrace trace = an::load_trace(one_step().write(dir.file("t.trace")));
  int told = 0;
  for (const an::LiveAlloc& a : trace.replay.live()) {
    if (!a.torch_block) continue;
    if (a.address == kSegment) {
      EXPECT_EQ(a.category, kParameter);
    }
    if (a.address == kSegment + 8 * MiB) {
      EXPECT_EQ(a.category, kOptimizerState);
    }
    told += a.category != 0;
  }
  EXPECT_EQ(told, 3);
}

// TorchEvent actions are append-only: an action this analyzer does not know (a later writer's, as
// the tag is to an older reader) is counted and ignored.
TEST(Categories, UnknownActionsAreIgnored) {
  TempDir dir;
  TraceBuilder t = base_trace();
  segment(t, kSegment, 8 * MiB);
  block(t, kSegment, 4 * MiB);
  t.torch(static_cast<gf::TorchAction>(200), kSegment, 4 * MiB);
  t.end();
  an::ProcessReport p = analyze(t, dir);
  EXPECT_EQ(p.summary.torch.events, 3u);
  EXPECT_EQ(p.summary.torch.live_blocks, 1u);
  EXPECT_EQ(p.categories->tags, 0u);
  EXPECT_EQ(at(p.categories->peak, MemoryCategory::kTemporary), 4 * MiB);
}

// A damaged trace's sizes may be anything: late tags on two blocks of 2^62 bytes and more move
// their bytes in the closed windows exactly, their sum past int64's range (the fuzz target's UBSan
// found the signed overflow).
TEST(Categories, LateTagsOnHugeBlocksMoveTheirBytesExactly) {
  TempDir dir;
  TraceBuilder t = base_trace();
  constexpr uint64_t kHuge = (uint64_t{1} << 62) + 4 * MiB;
  segment(t, kSegment, 64 * MiB);
  block(t, kSegment, kHuge);
  block(t, kSegment + kHuge, kHuge);
  for (int i = 0; i < 4; ++i) {
    block(t, kSegment + 8 * MiB, MiB);
    release(t, kSegment + 8 * MiB);
    t.marker(gf::MarkerKind::kStep, "optimizer.step");
  }
  tag(t, kSegment, kParameter);
  tag(t, kSegment + kHuge, kParameter);
  t.end();
  an::ProcessReport p = analyze(t, dir);
  ASSERT_TRUE(p.categories);
  ASSERT_GE(p.categories->windows.size(), 4u);
  for (const an::CategoryWindow& w : p.categories->windows) {
    EXPECT_EQ(at(w.at_peak, MemoryCategory::kParameter), 2 * kHuge) << w.first;
    EXPECT_LE(at(w.at_peak, MemoryCategory::kTemporary), MiB) << w.first;  // none left untagged
  }
}

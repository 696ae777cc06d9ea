// Timeline downsampling, HTML escaping and the pickle writer, on synthesized traces and values.
#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "findings/timeline.h"
#include "gpumemshim/analyzer/analyze.h"
#include "gpumemshim/analyzer/render.h"
#include "gpumemshim/analyzer/units.h"
#include "render/escape.h"
#include "render/json_parts.h"
#include "replay/load.h"
#include "report/analysis.h"
#include "report/stack_view.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace an = gpumemshim::analyzer;
namespace gf = gpumemshim::format;
using gpumemshim::testing::TempDir;
using gpumemshim::testing::TraceBuilder;
using nlohmann::json;

namespace {

constexpr uint64_t kAppBase = 0x400000;

TraceBuilder base_trace() {
  TraceBuilder t;
  t.process(7, "train");
  t.module("/nonexistent/bin/app", kAppBase, 0x10000);
  t.stack(1, {kAppBase + 0x1000});
  t.stack(2, {kAppBase + 0x2000});
  return t;
}

an::Timeline timeline_of(const TraceBuilder& t, const TempDir& dir, size_t max_samples) {
  std::string path = t.write(dir.file("t.trace"));
  an::LoadedTrace trace = an::load_trace(path);
  return an::build_timeline(trace, max_samples, 8);
}

}  // namespace

// 3000 steps of sawtooth memory with one spike in the middle: far more events than samples, yet
// the spike and the troughs survive, and per-site bytes add up to the total at every sample.
TEST(Timeline, DownsamplingKeepsPeakAndTroughs) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0x1000, 100, 2);  // a small buffer kept throughout (site 2)
  for (uint64_t i = 0; i < 3000; ++i) {
    uint64_t size = i == 1777 ? 5000 : 1000;
    t.alloc(0x10000, size, 1);
    t.free(0x10000);
    t.marker(gf::MarkerKind::kStep, "");
  }
  t.end();
  an::Timeline tl = timeline_of(t, dir, 100);
  ASSERT_LE(tl.samples.size(), 100u);
  ASSERT_GE(tl.samples.size(), 50u);
  uint64_t peak = 0, trough = UINT64_MAX;
  for (const an::TimelineSample& s : tl.samples) {
    peak = std::max(peak, s.live_bytes);
    if (s.time_ns > 0) trough = std::min(trough, s.live_bytes);
    uint64_t sum = 0;
    for (uint64_t v : s.sites) sum += v;
    EXPECT_EQ(sum, s.live_bytes);
    if (s.time_ns > 0) {
      ASSERT_EQ(s.sites.size(), 3u);
      EXPECT_EQ(s.sites[1], 100u) << "at " << s.time_ns;  // site 2's buffer, in every sample
    }
  }
  EXPECT_EQ(peak, 5100u);
  EXPECT_EQ(tl.peak_bytes, 5100u);
  EXPECT_EQ(trough, 100u);
  EXPECT_TRUE(std::is_sorted(tl.samples.begin(), tl.samples.end(),
                             [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; }));
  EXPECT_EQ(tl.steps_ns.size(), 3000u);
  ASSERT_EQ(tl.sites.size(), 2u);
  EXPECT_EQ(tl.sites[0].peak_bytes, 5000u);  // ordered by their own peak
  ASSERT_EQ(tl.at_peak.size(), 2u);
  EXPECT_EQ(tl.at_peak[0].bytes, 5000u);
  EXPECT_EQ(tl.at_peak[1].bytes, 100u);
}

// Two raw stacks that differ only in the shim's own frames are one call site: its peak is the
// peak of their sum, not either one's. Found from the replay's log of site changes when the trace
// is short enough, else by a second replay that knows the grouping: both must give the same.
void call_site_of_two_raw_stacks(size_t filler_pairs, uint64_t filler_size = 10) {
  TempDir dir;
  TraceBuilder t = base_trace();
  constexpr uint64_t kShimBase = 0x900000;
  t.module("/nonexistent/lib/libgpumemshim.so", kShimBase, 0x10000);
  t.stack(11, {kShimBase + 0x10, kAppBase + 0x3000});
  t.stack(12, {kShimBase + 0x20, kAppBase + 0x3000});
  // Busy work on another site first (the log, when dropped, is dropped before the peaks below).
  for (size_t i = 0; i < filler_pairs; ++i) {
    t.alloc(0x9000, filler_size, 2);
    t.free(0x9000);
  }
  t.alloc(0x1000, 100, 11);
  t.alloc(0x2000, 200, 12);  // both live: 300 at the call site
  t.free(0x1000);
  t.alloc(0x3000, 250, 12);  // stack 12 alone reaches 450, the call site 450 too
  t.free(0x2000);
  t.free(0x3000);
  t.alloc(0x4000, 50, 1);
  t.end();
  std::string path = t.write(dir.file("t.trace"));
  an::LoadedTrace trace = an::load_trace(path);
  EXPECT_EQ(trace.replay.timeline().site_log_complete(),
            2 * filler_pairs + 8 <= an::TimelineTracker::kMaxSiteLog && filler_size < (uint64_t{1} << 39));
  const uint64_t peak = std::max<uint64_t>(450, filler_pairs ? filler_size : 0);
  an::Timeline tl = an::build_timeline(trace, 100, 8);
  const size_t grouped = filler_pairs ? 1 : 0;  // call sites in first-seen order
  ASSERT_EQ(tl.all_sites.size(), grouped + 2);
  EXPECT_EQ(tl.all_sites[grouped].peak_bytes, 450u);  // the call site of stacks 11 and 12
  EXPECT_EQ(tl.all_sites[grouped + 1].peak_bytes, 50u);
  if (filler_pairs) {
    EXPECT_EQ(tl.all_sites[0].peak_bytes, filler_size);
  }
  EXPECT_EQ(tl.peak_bytes, peak);
  ASSERT_FALSE(tl.at_peak.empty());
  EXPECT_EQ(tl.at_peak[0].bytes, peak);
  uint64_t highest = 0;
  for (const an::TimelineSample& s : tl.samples) {
    uint64_t sum = 0;
    for (uint64_t b : s.sites) sum += b;
    EXPECT_EQ(sum, s.live_bytes);
    for (size_t i = 0; i < tl.sites.size(); ++i)
      if (tl.sites[i].id == tl.all_sites[grouped].id) highest = std::max(highest, s.sites[i]);
  }
  if (peak == 450) {  // else the samples show the other site's spike
    EXPECT_EQ(highest, 450u);
  }
}

TEST(Timeline, CallSiteOfSeveralRawStacksPeaksAtTheirSum) { call_site_of_two_raw_stacks(0); }

TEST(Timeline, CallSiteOfSeveralRawStacksPeaksAtTheirSumInALongTrace) {
  call_site_of_two_raw_stacks(an::TimelineTracker::kMaxSiteLog / 2 + 1);  // past the log: read again
}

TEST(Timeline, CallSiteOfSeveralRawStacksPeaksAtTheirSumAfterAHugeAllocation) {
  call_site_of_two_raw_stacks(1, uint64_t{1} << 40);  // a change the log cannot hold: read again
}

TEST(Timeline, TorchReservedAndAllocated) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.torch(gf::TorchAction::kSegmentAlloc, 0x100000, 1 << 20);
  t.torch(gf::TorchAction::kAlloc, 0x100000, 4096, 1);
  t.torch(gf::TorchAction::kAlloc, 0x101000, 8192, 1);
  t.torch(gf::TorchAction::kFreeCompleted, 0x100000, 4096);
  t.end();
  an::Timeline tl = timeline_of(t, dir, 2000);
  ASSERT_TRUE(tl.has_torch);
  json j = an::timeline_json(tl);
  uint64_t reserved = 0, allocated = 0;
  for (const json& s : j["samples"]) {
    reserved = std::max(reserved, s["reserved_bytes"].get<uint64_t>());
    allocated = std::max(allocated, s["allocated_bytes"].get<uint64_t>());
  }
  EXPECT_EQ(reserved, 1u << 20);
  EXPECT_EQ(allocated, 4096u + 8192u);
  EXPECT_EQ(j["samples"].back()["allocated_bytes"], 8192u);
}

TEST(Timeline, NoEventsNoSamples) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.end();
  an::Timeline tl = timeline_of(t, dir, 2000);
  EXPECT_TRUE(tl.samples.empty());
  EXPECT_EQ(an::timeline_json(tl)["samples"].size(), 0u);
}

// The last sample is at the End record's time exactly, also where that time in seconds times 1e9
// rounds to 2^64 (a damaged or hostile trace).
TEST(Timeline, EndsAtTheEndRecordNear2To64) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0x1000, 100, 1);
  t.at(UINT64_MAX - 1000).end();
  an::Timeline tl = timeline_of(t, dir, 100);
  ASSERT_FALSE(tl.samples.empty());
  EXPECT_EQ(tl.samples.back().time_ns, UINT64_MAX - 1000);
  EXPECT_EQ(tl.samples.back().live_bytes, 100u);
}

// The analysis's StackView handed to the timeline (as `report` does) gives what each would make
// on its own; a view with shorter stacks than the timeline's is not used by it.
TEST(Timeline, SharedStackViewGivesTheSameReport) {
  TempDir dir;
  TraceBuilder t = base_trace();
  std::vector<uint64_t> deep;
  for (uint64_t i = 0; i < 40; ++i) deep.push_back(kAppBase + 0x3000 + 0x10 * i);
  t.stack(3, deep);
  t.alloc(0x1000, 100, 2);  // kept to the end: a leak
  for (uint64_t i = 0; i < 20; ++i) {
    t.alloc(0x10000 + i, 1000 + i, 1);
    t.alloc(0x20000 + 0x100 * i, 64, 3);  // grows step over step, never freed
    t.free(0x10000 + i);
    t.marker(gf::MarkerKind::kStep, "");
  }
  t.end();
  an::LoadedTrace trace = an::load_trace(t.write(dir.file("t.trace")));
  auto report_of = [&](const an::AnalyzeOptions& options, an::StackView* stacks) {
    an::Report r;
    r.processes.push_back(an::analyze_trace(trace, options, nullptr, stacks));
    return an::report_json(r).dump();
  };
  auto timeline_of = [&](an::StackView* stacks) {
    return an::timeline_json(
               an::build_timeline(trace, an::kMaxTimelineSamples, an::kTimelineTopSites, stacks))
        .dump();
  };
  const std::string own_report = report_of({}, nullptr);
  const std::string own_timeline = timeline_of(nullptr);
  EXPECT_NE(own_timeline.find("0x4031f0"), std::string::npos);  // the deep stack's 32nd frame
  EXPECT_EQ(own_timeline.find("0x403200"), std::string::npos);  // and no 33rd
  an::StackView shared(trace);
  EXPECT_EQ(report_of({}, &shared), own_report);
  EXPECT_EQ(timeline_of(&shared), own_timeline);
  an::StackView fresh(trace);  // the timeline first, then the analysis
  EXPECT_EQ(timeline_of(&fresh), own_timeline);
  EXPECT_EQ(report_of({}, &fresh), own_report);
  an::AnalyzeOptions short_stacks;
  short_stacks.max_frames = 4;
  an::StackView short_view(trace, 4);
  EXPECT_EQ(report_of(short_stacks, &short_view), report_of(short_stacks, nullptr));
  EXPECT_EQ(timeline_of(&short_view), own_timeline);
}

// frames_to_json fills each object in place; it must equal the initializer-list form the reports
// used before, pc written as fmt's "{:#x}".
TEST(FramesJson, SameAsInitializerListObjects) {
  std::vector<an::Frame> frames(4);
  frames[0] = {"main", "/src/app.cpp", 42, "/bin/app", 0x401234, 0x1234, false, false};
  frames[1] = {"", "", 0, "", 0, 0, true, false};
  frames[2] = {"caf\xc3\xa9 \xff", "m\"x\\.py", 7, "", UINT64_MAX, 0, false, true};
  frames[3] = {"inl", "a.h", 1, "/lib/libx.so", 0x10, 0x10, true, true};
  json expected = json::array();
  for (const an::Frame& f : frames)
    expected.push_back({{"function", f.function}, {"file", f.file}, {"line", f.line},
                        {"module", f.module}, {"python", f.python}, {"inlined", f.inlined},
                        {"pc", fmt::format("{:#x}", f.pc)}});
  json got = an::frames_to_json(frames);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(got.dump(2, ' ', false, json::error_handler_t::replace),
            expected.dump(2, ' ', false, json::error_handler_t::replace));
  EXPECT_EQ(an::frames_to_json({}).dump(), "[]");
  EXPECT_EQ(an::pc_hex(0), "0x0");
  EXPECT_EQ(an::pc_hex(0x7f12ab), "0x7f12ab");
  EXPECT_EQ(an::pc_hex(UINT64_MAX), "0xffffffffffffffff");
}

TEST(ReportHtml, EscapesEverythingFromTheTrace) {
  EXPECT_EQ(an::html_escape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  an::Report report;
  report.summary.peak_bytes = 10;
  an::ProcessReport& p = report.processes.emplace_back();
  p.info.pid = 1;
  p.info.command_line = "<script>alert(1)</script>";
  p.trace = "\"><img src=x onerror=alert(2)>";
  an::SiteGroup& leak = p.leaks.emplace_back();
  leak.kind = "leak";
  leak.bytes = 10;
  leak.count = 1;
  leak.reason = "<b>r</b>";
  leak.stack = {an::Frame{"<svg onload=alert(3)>", "a.py", 3, "", 0, 0, false, false}};
  p.advice.push_back({"amp", "<i>t</i>", "a", "leak:1", "x <e>"});
  std::string html = an::report_html(report);
  for (const char* raw : {"<script>alert", "<img src=x", "<svg onload", "<b>r</b>", "<i>t</i>", "<e>"})
    EXPECT_EQ(html.find(raw), std::string::npos) << raw;
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("&lt;svg onload=alert(3)&gt;"), std::string::npos);
  EXPECT_NE(html.find("<h2>Advice</h2>"), std::string::npos);  // sections appear when present
  EXPECT_EQ(html.find("<h2>Growth</h2>"), std::string::npos);  // ... and only then
}

// Live bytes of nearly 2^64 (a damaged or hostile trace): the chart's top gridline, a
// double that rounds to 2^64, is labelled with the largest byte count, not a wrapped-around one.
TEST(ReportHtml, ChartOfNearly2To64LiveBytes) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0x1000, UINT64_MAX, 1);
  t.end();
  an::AnalyzeOptions options;
  options.jobs = 1;
  options.timelines = true;
  std::string html = an::report_html(an::analyze({t.write(dir.file("t.trace"))}, options));
  EXPECT_NE(html.find("text-anchor=\"end\">16.00 EiB</text>"), std::string::npos);
}

TEST(Pickle, Protocol2Opcodes) {
  EXPECT_EQ(an::to_pickle(json(nullptr)), std::string("\x80\x02N.", 4));
  EXPECT_EQ(an::to_pickle(json(7)), std::string("\x80\x02K\x07.", 5));
  EXPECT_EQ(an::to_pickle(json(300)), std::string("\x80\x02M\x2c\x01.", 6));
  EXPECT_EQ(an::to_pickle(json(-1)), std::string("\x80\x02J\xff\xff\xff\xff.", 8));
  // 2^63: unsigned beyond int64 → LONG1 with a zero sign byte.
  EXPECT_EQ(an::to_pickle(json(uint64_t{1} << 63)),
            std::string("\x80\x02\x8a\x09\0\0\0\0\0\0\0\x80\0.", 14));
  EXPECT_EQ(an::to_pickle(json("h\xffi")), std::string("\x80\x02X\x05\0\0\0h\xef\xbf\xbdi.", 13));
  EXPECT_EQ(an::to_pickle(json::array({true, false})), std::string("\x80\x02](\x88\x89" "e.", 8));
  EXPECT_EQ(an::to_pickle(json::object()), std::string("\x80\x02}.", 4));
}

// Growth without step markers (analyzer/findings/growth_windows.h): windows of each thread's own
// allocations, so that when events happened and how threads interleaved changes no finding. The
// same program's events, at two time spacings and in two interleavings of its threads, give the
// same growth findings, in the same unit; a leak made once at the end is a leak, not growth.
#include "findings/growth_windows.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpumemshim/analyzer/analyze.h"
#include "gpumemshim/analyzer/render.h"
#include "gpumemshim/analyzer/report.h"
#include "gpumemshim/format/records.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace an = gpumemshim::analyzer;
namespace gf = gpumemshim::format;
using gpumemshim::testing::TempDir;
using gpumemshim::testing::TraceBuilder;

namespace {

constexpr uint64_t kWork = 1, kKept = 2, kLastBuffer = 3;  // the program's allocation sites

// One event of a thread's own sequence.
struct Event {
  bool alloc;
  uint64_t address;
  uint64_t size;
  uint64_t stack;
};
using Program = std::vector<std::vector<Event>>;  // each thread's events, in its order

// Each thread does `pairs` alloc/free pairs at kWork; with keep_every > 0 it also keeps one
// buffer at kKept after every keep_every pairs (growth); it ends holding one 4 KiB buffer at
// kLastBuffer (a leak).
Program threads_program(int threads, int pairs, int keep_every) {
  Program p(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    std::vector<Event>& e = p[static_cast<size_t>(t)];
    const uint64_t base = 0x100000000ull * static_cast<uint64_t>(t + 1);
    uint64_t kept = 0;
    for (int i = 0; i < pairs; ++i) {
      e.push_back({true, base, 256, kWork});
      e.push_back({false, base, 0, 0});
      if (keep_every > 0 && (i + 1) % keep_every == 0)
        e.push_back({true, base + 0x10000000 + 0x1000 * kept++, 4096, kKept});
    }
    e.push_back({true, base + 0x20000000, 4096, kLastBuffer});
  }
  return p;
}

// How the threads' events are merged into one trace: the threads' sequences are kept, the order
// across threads is the scheduler's.
enum class Interleave { kRoundRobin, kOneAfterAnother, kUneven };

std::vector<std::pair<uint64_t, Event>> schedule(const Program& p, Interleave how) {
  std::vector<std::pair<uint64_t, Event>> out;  // (thread id, event)
  std::vector<size_t> next(p.size(), 0);
  size_t remaining = 0;
  for (const auto& t : p) remaining += t.size();
  uint64_t seed = 12345;
  while (remaining > 0) {
    for (size_t t = 0; t < p.size(); ++t) {
      size_t burst = 1;
      if (how == Interleave::kOneAfterAnother) burst = p[t].size();
      if (how == Interleave::kUneven) {  // bursts of 1..4000 events, a thread at a time
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        burst = 1 + (seed >> 33) % 4000;
      }
      for (; burst > 0 && next[t] < p[t].size(); --burst, --remaining)
        out.emplace_back(1000 + t, p[t][next[t]++]);
    }
  }
  return out;
}

// The trace of those events, the n-th at time_of(n).
std::string write_trace(const TempDir& dir, const std::string& name,
                        const std::vector<std::pair<uint64_t, Event>>& events,
                        const std::function<uint64_t(uint64_t)>& time_of) {
  TraceBuilder t;
  t.process(77, "threads_app");
  t.device(0, 16ull << 30);
  for (uint64_t s : {kWork, kKept, kLastBuffer}) t.stack(s, {0x401000 + 0x100 * s});
  uint64_t n = 0;
  for (const auto& [thread, e] : events) {
    const uint64_t time = time_of(n++);
    if (e.alloc) {
      gf::AllocRecord r;
      r.time_ns = time;
      r.thread_id = thread;
      r.api = gf::Api::kCudaMalloc;
      r.kind = gf::MemoryKind::kDevice;
      r.address = e.address;
      r.size = e.size;
      r.stack_id = e.stack;
      t.add(r);
    } else {
      gf::FreeRecord r;
      r.time_ns = time;
      r.thread_id = thread;
      r.api = gf::Api::kCudaFree;
      r.kind = gf::MemoryKind::kDevice;
      r.address = e.address;
      t.add(r);
    }
  }
  t.at(time_of(n));
  t.end();
  return t.write(dir.file(name));
}

uint64_t even_spacing(uint64_t n) {
  return 1000 + n * 1000;
}
// Irregular, ever longer gaps: a 25 ms pause every 97 events (a loaded machine's preemptions),
// and the rest of the gaps growing with the run.
uint64_t uneven_spacing(uint64_t n) {
  return 1000 + n * 100 + (n / 97) * 25'000'000 + (n / 1000) * (n / 1000) * 1'000'000;
}

// What a user compares between two runs: the growth findings and the leaks, and check's verdict.
struct Findings {
  std::vector<std::string> growth;  // site, rate, unit, windows, confidence
  std::vector<std::string> leaks;
  std::vector<std::string> advice;
  bool leaked = false;  // what fails `check` by default
  bool operator==(const Findings&) const = default;
};

uint64_t site_of(const std::vector<an::Frame>& stack) {
  return stack.empty() ? 0 : (stack[0].pc - 0x401000) / 0x100;
}

Findings findings_of(const std::string& path) {
  const an::Report r = an::analyze({path});
  Findings f;
  const an::ProcessReport& p = r.processes.at(0);
  for (const an::Growth& g : p.growth)
    f.growth.push_back(fmt::format("site {} +{} per {} over {} {} ({:.3f}) {}->{}",
                                   site_of(g.stack), g.bytes_per_step, g.unit, g.steps, g.basis,
                                   g.confidence, g.first_live_bytes, g.last_live_bytes));
  for (const an::SiteGroup& l : p.leaks)
    f.leaks.push_back(
        fmt::format("site {} {} {} bytes in {}", site_of(l.stack), l.kind, l.bytes, l.count));
  for (const an::Advice& a : p.advice) f.advice.push_back(a.id + " for " + a.finding);
  f.leaked = r.summary.leaked_bytes > 0;
  return f;
}

std::string describe(const Findings& f) {
  std::string out;
  for (const std::string& g : f.growth) out += "growth: " + g + "\n";
  for (const std::string& l : f.leaks) out += "leak: " + l + "\n";
  for (const std::string& a : f.advice) out += "advice: " + a + "\n";
  return out + (f.leaked ? "leaked\n" : "nothing leaked\n");
}

}  // namespace

// The leak of each thread at its end, at two time spacings and three interleavings: the leak and
// the same verdict every time, never growth.
TEST(GrowthWindows, ALeakAtEachThreadsEndIsNotGrowthHoweverTheThreadsInterleave) {
  TempDir dir;
  const Program program = threads_program(16, 2000, 0);
  std::vector<Findings> runs;
  int n = 0;
  for (Interleave how :
       {Interleave::kRoundRobin, Interleave::kOneAfterAnother, Interleave::kUneven})
    for (auto* spacing : {&even_spacing, &uneven_spacing})
      runs.push_back(findings_of(
          write_trace(dir, "t" + std::to_string(n++) + ".trace", schedule(program, how), spacing)));
  const Findings& first = runs[0];
  EXPECT_TRUE(first.growth.empty()) << describe(first);
  for (const std::string& a : first.advice)
    EXPECT_EQ(a.find("del-references"), std::string::npos) << a;
  ASSERT_EQ(first.leaks.size(), 1u) << describe(first);
  EXPECT_EQ(first.leaks[0], "site 3 leak 65536 bytes in 16");
  EXPECT_TRUE(first.leaked);
  for (size_t i = 1; i < runs.size(); ++i)
    EXPECT_EQ(runs[i], first) << i << ":\n" << describe(runs[i]);
}

// A program that keeps one more buffer every 100 pairs on each thread: growth at that site, in
// windows of allocations, with the same rate, window count and confidence whatever the timestamps
// and the interleaving.
TEST(GrowthWindows, SteadyGrowthIsFoundTheSameAtAnyTimeSpacingAndInterleaving) {
  TempDir dir;
  const Program program = threads_program(4, 4000, 100);
  std::vector<Findings> runs;
  int n = 0;
  for (Interleave how :
       {Interleave::kRoundRobin, Interleave::kOneAfterAnother, Interleave::kUneven})
    for (auto* spacing : {&even_spacing, &uneven_spacing})
      runs.push_back(findings_of(
          write_trace(dir, "g" + std::to_string(n++) + ".trace", schedule(program, how), spacing)));
  const Findings& first = runs[0];
  ASSERT_EQ(first.growth.size(), 1u) << describe(first);
  // 4041 allocations a thread: 64 windows of 64 allocations; each of 4 threads keeps 4096 bytes
  // every 101 allocations: about 10 KiB a window.
  EXPECT_NE(first.growth[0].find("site 2 +"), std::string::npos) << first.growth[0];
  EXPECT_NE(first.growth[0].find(" per window of 64 allocations per thread over "),
            std::string::npos)
      << first.growth[0];
  const an::Report r = an::analyze({dir.file("g0.trace")});
  EXPECT_NEAR(r.processes.at(0).growth.at(0).bytes_per_step, 4.0 * 4096 * 64 / 101,
              4.0 * 4096 * 64 / 101 / 20);
  for (size_t i = 1; i < runs.size(); ++i)
    EXPECT_EQ(runs[i], first) << i << ":\n" << describe(runs[i]);
}

// The unit is said in every output: the JSON's basis, unit and window size, the text's rate.
TEST(GrowthWindows, TheUnitIsSaidInJsonAndText) {
  TempDir dir;
  const std::string path =
      write_trace(dir, "u.trace", schedule(threads_program(1, 3000, 50), Interleave::kRoundRobin),
                  even_spacing);
  const an::Report r = an::analyze({path});
  ASSERT_EQ(r.processes.at(0).growth.size(), 1u);
  const an::Growth& g = r.processes[0].growth[0];
  // 3061 allocations: windows of 64, 48 of them; one 4096-byte buffer kept every 51 allocations.
  EXPECT_EQ(g.basis, "allocations");
  EXPECT_EQ(g.window_allocations, 64u);
  EXPECT_EQ(g.unit, "window of 64 allocations per thread");
  EXPECT_NEAR(g.bytes_per_step, 4096.0 * 64 / 51, 4096.0 / 2);
  const nlohmann::json j = an::report_json(r)["growth"][0];
  EXPECT_EQ(j["basis"], "allocations");
  EXPECT_EQ(j["unit"], "window of 64 allocations per thread");
  EXPECT_EQ(j["window_allocations"], 64);
  EXPECT_FALSE(j.contains("bucket_s"));
  const std::string text = an::report_text(r);
  EXPECT_NE(text.find("per window of 64 allocations per thread over "), std::string::npos) << text;
}

// The window size depends on the busiest thread's allocations alone, and a free on another thread
// whose clock is behind never takes bytes out before they came in.
TEST(GrowthWindows, WindowSizeFollowsTheBusiestThreadAndFreesNeverPrecedeTheirAllocation) {
  an::AllocationWindows w;
  w.thread(1);
  std::vector<an::AllocationWindows::Tag> tags;
  for (int i = 0; i < 1000; ++i) tags.push_back(w.allocated(0, 10));
  EXPECT_EQ(w.window_allocations(), 16u);  // 1000 allocations: 63 windows of 16
  w.thread(2);                             // no allocation yet: its clock is at window 0
  for (const an::AllocationWindows::Tag t : tags) w.freed(0, 10, t);
  w.allocated(1, 1);  // a later allocation: those frees were not the process's teardown
  const an::SiteSampler s = w.samples(2);
  const std::vector<uint64_t> series = s.series(0);
  ASSERT_EQ(series.size(), 63u);
  // Each allocation is freed in its own window (the freeing thread's clock is behind): at every
  // window's end nothing is live, and nothing ever reads below zero.
  for (uint64_t v : series) EXPECT_EQ(v, 0u);
}

// Frees after the process's last allocation are its teardown: the windows end before them, so
// memory that rose all run and was released at exit still rose.
TEST(GrowthWindows, TheTeardownAfterTheLastAllocationIsLeftOut) {
  an::AllocationWindows w;
  w.thread(1);
  std::vector<an::AllocationWindows::Tag> tags;
  for (int i = 0; i < 64; ++i) tags.push_back(w.allocated(0, 10));
  for (const an::AllocationWindows::Tag t : tags) w.freed(0, 10, t);
  const std::vector<uint64_t> series = w.samples(1).series(0);
  ASSERT_EQ(series.size(), 64u);
  EXPECT_EQ(series.front(), 10u);
  EXPECT_EQ(series.back(), 640u);
}

TEST(GrowthWindows, GrowthReleasedAtExitIsStillGrowth) {
  TempDir dir;
  // One thread keeps a buffer every 50 pairs, then releases them all after its last allocation
  // (a function's list freed when it returns, at the end of the script).
  Program p = threads_program(1, 3000, 50);
  const uint64_t base = 0x100000000ull;
  for (uint64_t k = 0; k < 60; ++k) p[0].push_back({false, base + 0x10000000 + 0x1000 * k, 0, 0});
  const an::Report r = an::analyze(
      {write_trace(dir, "t.trace", schedule(p, Interleave::kRoundRobin), even_spacing)});
  ASSERT_EQ(r.processes.at(0).growth.size(), 1u);
  EXPECT_EQ(r.processes[0].growth[0].unit, "window of 64 allocations per thread");
  EXPECT_NEAR(r.processes[0].growth[0].bytes_per_step, 4096.0 * 64 / 51, 4096.0 / 2);
  EXPECT_EQ(r.summary.leaked_bytes, 4096u);  // the last buffer alone: the kept ones were freed
}

// A thread's clock goes on where it stopped when its events come again, the first thread's too.
TEST(GrowthWindows, ThreadsKeepTheirClocksWhenTheirEventsComeAgain) {
  an::AllocationWindows w;  // the first events' thread: 0, as in traces without thread ids
  for (int i = 0; i < 100; ++i) w.allocated(0, 10);
  w.thread(5);
  w.allocated(1, 10);
  w.thread(0);
  for (int i = 0; i < 100; ++i) w.allocated(0, 10);
  EXPECT_EQ(w.window_allocations(), 4u);  // thread 0's 200 allocations: 50 windows of 4
}

// Replay and findings on synthesized traces.
#include "replay/replay.h"

#include <gtest/gtest.h>

#include <map>

#include "report/analysis.h"
#include "gpumemshim/analyzer/errors.h"
#include "replay/load.h"
#include "gpumemshim/analyzer/render.h"
#include "gpumemshim/analyzer/units.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace an = gpumemshim::analyzer;
namespace gf = gpumemshim::format;
using gpumemshim::testing::TempDir;
using gpumemshim::testing::TraceBuilder;

namespace {

constexpr uint64_t MiB = 1 << 20;
constexpr uint64_t kShimBase = 0x10000, kAppBase = 0x400000;

// A process with a shim module and an app module; stack 1 and 2 start in the shim.
TraceBuilder base_trace(uint64_t pid = 100, gf::Version version = gf::kVersion) {
  TraceBuilder t(version);
  t.process(pid, "app --leak");
  t.module("/nonexistent/lib/libgpumemshim.so", kShimBase, 0x10000);
  t.module("/nonexistent/bin/app", kAppBase, 0x10000);
  t.device(0, 80ull << 30, "Fake GPU");
  t.stack(1, {kShimBase + 0x100, kShimBase + 0x200, kAppBase + 0x1000, kAppBase + 0x2000});
  t.stack(2, {kShimBase + 0x100, kAppBase + 0x3000, kAppBase + 0x2000});
  return t;
}

an::Report analyze(const TraceBuilder& t, const TempDir& dir, const char* name = "t.trace") {
  return an::analyze({t.write(dir.file(name))});
}

}  // namespace

TEST(Replay, CountsPeakAndLeaks) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0xa000000, 1 * MiB, 1).alloc(0xb000000, 2 * MiB, 1).alloc(0xc000000, 4 * MiB, 2);
  t.free(0xa000000).free(0xc000000);
  t.alloc(0xd000000, 1 * MiB, 1);
  t.end();
  an::Report r = analyze(t, dir);
  ASSERT_EQ(r.processes.size(), 1u);
  const auto& p = r.processes[0];
  EXPECT_EQ(p.summary.allocations, 4u);
  EXPECT_EQ(p.summary.frees, 2u);
  EXPECT_EQ(p.summary.peak_bytes, 7 * MiB);
  EXPECT_EQ(p.summary.leaked_bytes, 3 * MiB);
  EXPECT_TRUE(p.clean_exit);
  EXPECT_FALSE(p.truncated);
  ASSERT_EQ(p.leaks.size(), 1u);
  const an::SiteGroup& g = p.leaks[0];
  EXPECT_EQ(g.bytes, 3 * MiB);
  EXPECT_EQ(g.count, 2u);
  EXPECT_EQ(g.kind, "leak");
  EXPECT_EQ(g.api, gf::Api::kCudaMalloc);
  EXPECT_EQ(g.pid, 100u);
  EXPECT_EQ(g.id.size(), 12u);
  // The shim's frames are dropped: the innermost frame is the app's.
  ASSERT_FALSE(g.stack.empty());
  EXPECT_EQ(g.stack[0].module, "/nonexistent/bin/app");
  EXPECT_EQ(g.stack[0].pc, kAppBase + 0x1000);
  EXPECT_EQ(r.summary.leaked_bytes, 3 * MiB);
}

TEST(Replay, LeaksGroupedBySiteAndSortedByBytes) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0x1000, 100, 1).alloc(0x2000, 100, 1).alloc(0x3000, 5000, 2).alloc(0x4000, 7, 0);
  an::Report r = analyze(t, dir);
  const auto& leaks = r.processes[0].leaks;
  ASSERT_EQ(leaks.size(), 3u);
  EXPECT_EQ(leaks[0].bytes, 5000u);
  EXPECT_EQ(leaks[1].bytes, 200u);
  EXPECT_EQ(leaks[1].count, 2u);
  EXPECT_EQ(leaks[2].bytes, 7u);
  EXPECT_TRUE(leaks[2].stack.empty());
  EXPECT_NE(leaks[0].id, leaks[1].id);
  EXPECT_FALSE(r.processes[0].clean_exit);  // no End record
}

TEST(Replay, StableIdsAcrossRunsAndAddresses) {
  TempDir dir;
  TraceBuilder a = base_trace(1), b = base_trace(2);
  a.alloc(0x1000, 64, 1);
  b.alloc(0x9000, 128, 1);
  auto ra = analyze(a, dir, "a.trace");
  auto rb = analyze(b, dir, "b.trace");
  EXPECT_EQ(ra.processes[0].leaks[0].id, rb.processes[0].leaks[0].id);
}

TEST(Replay, UnmatchedAndFailedFrees) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0x1000, 64, 1);
  t.free(0x1000, gf::Api::kCudaFree, gf::MemoryKind::kDevice, /*result=*/1);  // failed: stays
  t.free(0x5000);                                                             // unknown address
  t.free(0);                                                                  // cudaFree(nullptr)
  t.end();
  auto r = analyze(t, dir);
  const auto& s = r.processes[0].summary;
  EXPECT_EQ(s.frees, 0u);
  EXPECT_EQ(s.failed_frees, 1u);
  EXPECT_EQ(s.unmatched_frees, 1u);
  EXPECT_EQ(s.leaked_bytes, 64u);
}

TEST(Replay, FreeThroughAnotherApiOfTheSameAddressSpace) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0x1000, 64, 1, gf::Api::kCudaMallocAsync, gf::MemoryKind::kPool);
  t.alloc(0x2000, 64, 1, gf::Api::kCudaMallocManaged, gf::MemoryKind::kManaged);
  t.free(0x1000, gf::Api::kCudaFree, gf::MemoryKind::kDevice);
  t.free(0x2000, gf::Api::kCudaFree, gf::MemoryKind::kDevice);
  t.end();
  auto r = analyze(t, dir);
  const auto& s = r.processes[0].summary;
  EXPECT_EQ(s.frees, 2u);
  EXPECT_EQ(s.unmatched_frees, 0u);
  EXPECT_EQ(s.by_kind[static_cast<int>(gf::MemoryKind::kPool)].frees, 1u);
  EXPECT_EQ(s.by_kind[static_cast<int>(gf::MemoryKind::kManaged)].frees, 1u);
  EXPECT_EQ(s.leaked_bytes, 0u);
}

TEST(Replay, EventsFromThreadBuffersAreReplayedInTimeOrder) {
  TempDir dir;
  TraceBuilder t = base_trace();
  // Thread 2's buffer reached the file before thread 1's: its reuse of 0x1000 comes first.
  t.at(1000).alloc(0x1000, 64, 1);
  t.at(3000).alloc(0x1000, 128, 1);
  t.at(2000).free(0x1000);
  t.at(5000).end();
  auto r = analyze(t, dir);
  const auto& s = r.processes[0].summary;
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.frees, 1u);
  EXPECT_EQ(s.unmatched_frees, 0u);
  EXPECT_EQ(s.leaked_bytes, 128u);
}

TEST(Replay, FailedAllocationsAreListed) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.add(gf::MemInfoRecord{1, 0, 10 * MiB, 80 * MiB});
  t.alloc(0x1000, 8 * MiB, 1);
  t.failed(64 * MiB, 2, 2);
  t.free(0x1000);
  t.end();
  auto r = analyze(t, dir);
  EXPECT_EQ(r.summary.failed_allocations, 1u);
  ASSERT_EQ(r.processes[0].failures.size(), 1u);
  const an::Failure& f = r.processes[0].failures[0];
  EXPECT_EQ(f.event.size, 64 * MiB);
  EXPECT_EQ(f.event.error, 2u);
  EXPECT_EQ(f.event.live_device_bytes, 8 * MiB);
  EXPECT_TRUE(f.event.has_meminfo);
  EXPECT_EQ(f.event.meminfo_free, 10 * MiB);
  ASSERT_FALSE(f.stack.empty());
  EXPECT_EQ(f.stack[0].pc, kAppBase + 0x3000);
  EXPECT_TRUE(r.processes[0].leaks.empty());
}

TEST(Replay, VmmPhysicalMappingReservationAndPinnedHostAreSeparate) {
  TempDir dir;
  TraceBuilder t = base_trace();
  // The same number as a handle, a mapping address, a reservation and a pinned host pointer.
  const uint64_t x = 0x7000000;
  t.alloc(x, 32 * MiB, 1, gf::Api::kCuMemAddressReserve, gf::MemoryKind::kReservation);
  t.alloc(x, 2 * MiB, 1, gf::Api::kCuMemCreate, gf::MemoryKind::kPhysical);
  t.alloc(x, 2 * MiB, 1, gf::Api::kCuMemMap, gf::MemoryKind::kMapping);
  t.alloc(x, 4096, 2, gf::Api::kCudaMallocHost, gf::MemoryKind::kPinnedHost);
  t.alloc(x, 1 * MiB, 2);  // plain device memory at the same number
  t.free(x, gf::Api::kCuMemUnmap, gf::MemoryKind::kMapping);
  t.end();
  auto r = analyze(t, dir);
  const auto& p = r.processes[0];
  using K = gf::MemoryKind;
  auto kind = [&](K k) { return p.summary.by_kind[static_cast<int>(k)]; };
  EXPECT_EQ(p.summary.allocations, 5u);
  EXPECT_EQ(p.summary.frees, 1u);
  EXPECT_EQ(p.summary.unmatched_frees, 0u);
  EXPECT_EQ(kind(K::kMapping).frees, 1u);
  EXPECT_EQ(kind(K::kPhysical).live_bytes, 2 * MiB);
  EXPECT_EQ(kind(K::kReservation).live_bytes, 32 * MiB);
  EXPECT_EQ(kind(K::kPinnedHost).live_bytes, 4096u);
  // Peak counts device memory only: physical + device, not mapping, reservation or host.
  EXPECT_EQ(p.summary.peak_bytes, 3 * MiB);
  // Leaks: physical, device and pinned host; the reservation is address space.
  EXPECT_EQ(p.summary.leaked_bytes, 3 * MiB + 4096);
  ASSERT_EQ(p.leaks.size(), 3u);
  ASSERT_EQ(p.address_space.size(), 1u);
  EXPECT_EQ(p.address_space[0].memory, K::kReservation);
  EXPECT_EQ(p.address_space[0].bytes, 32 * MiB);
  bool pinned = false;
  for (const auto& g : p.leaks) pinned |= g.memory == K::kPinnedHost && g.bytes == 4096;
  EXPECT_TRUE(pinned);
}

// A cuMemMap record as the shim writes it: the handle in the stream field.
void vmm_map(TraceBuilder& t, uint64_t va, uint64_t size, uint64_t handle, uint64_t stack) {
  gf::AllocRecord r;
  r.time_ns = t.now() + 1000;
  r.thread_id = 1;
  r.api = gf::Api::kCuMemMap;
  r.kind = gf::MemoryKind::kMapping;
  r.address = va;
  r.size = size;
  r.stack_id = stack;
  r.stream = handle;
  t.add(r).at(r.time_ns + 1000);
}
// A cuMemUnmap record as the shim writes it: the range's size in the stream field.
void vmm_unmap(TraceBuilder& t, uint64_t va, uint64_t size) {
  gf::FreeRecord r;
  r.time_ns = t.now() + 1000;
  r.thread_id = 1;
  r.device = -1;
  r.api = gf::Api::kCuMemUnmap;
  r.kind = gf::MemoryKind::kMapping;
  r.address = va;
  r.stream = size;
  t.add(r).at(r.time_ns + 1000);
}
void vmm_create(TraceBuilder& t, uint64_t handle, uint64_t size, uint64_t stack) {
  t.alloc(handle, size, stack, gf::Api::kCuMemCreate, gf::MemoryKind::kPhysical);
}
void vmm_release(TraceBuilder& t, uint64_t handle) {
  t.free(handle, gf::Api::kCuMemRelease, gf::MemoryKind::kPhysical);
}
// Every byte of physical memory freed, and every free matched.
void expect_all_freed(const an::ProcessReport& p) {
  EXPECT_EQ(p.summary.leaked_bytes, 0u);
  EXPECT_TRUE(p.leaks.empty());
  EXPECT_EQ(p.summary.unmatched_frees, 0u);
  EXPECT_EQ(p.summary.by_kind[static_cast<int>(gf::MemoryKind::kPhysical)].live_bytes, 0u);
}

// CUDA's idiom: create, map, release at once; the memory lives until the last unmap. Three
// handles mapped side by side are unmapped by one cuMemUnmap of the whole range.
TEST(Replay, VmmReleasedWhileMappedLivesUntilUnmapped) {
  TempDir dir;
  TraceBuilder t = base_trace();
  const uint64_t va = 0x7f0000000000;
  t.alloc(va, 8 * MiB, 2, gf::Api::kCuMemAddressReserve, gf::MemoryKind::kReservation);
  for (uint64_t i = 0; i < 3; ++i) {
    vmm_create(t, 0x100 + i, 2 * MiB, 1);
    vmm_map(t, va + i * 2 * MiB, 2 * MiB, 0x100 + i, 2);
    vmm_release(t, 0x100 + i);
  }
  vmm_unmap(t, va, 6 * MiB);
  t.free(va, gf::Api::kCuMemAddressFree, gf::MemoryKind::kReservation);
  t.end();
  const auto r = analyze(t, dir);
  const auto& p = r.processes[0];
  auto kind = [&](gf::MemoryKind k) { return p.summary.by_kind[static_cast<int>(k)]; };
  EXPECT_EQ(p.summary.peak_bytes, 6 * MiB);
  expect_all_freed(p);
  EXPECT_TRUE(p.address_space.empty());
  EXPECT_EQ(p.summary.frees, 3u + 3u + 1u);
  EXPECT_EQ(kind(gf::MemoryKind::kMapping).frees, 3u);
  EXPECT_EQ(kind(gf::MemoryKind::kPhysical).frees, 3u);
}

// Released while mapped and never unmapped: a leak of the mapping's line, naming the creating one.
TEST(Replay, VmmReleasedStillMappedAtExitLeaksAtTheMappingLine) {
  TempDir dir;
  TraceBuilder t = base_trace();
  const uint64_t va = 0x7f0000000000;
  for (uint64_t i = 0; i < 3; ++i) {
    vmm_create(t, 0x100 + i, 2 * MiB, 1);
    vmm_map(t, va + i * 2 * MiB, 2 * MiB, 0x100 + i, 2);
    vmm_release(t, 0x100 + i);
  }
  vmm_unmap(t, va, 4 * MiB);  // the third mapping stays
  t.end();
  const auto r = analyze(t, dir);
  const auto& p = r.processes[0];
  EXPECT_EQ(p.summary.peak_bytes, 6 * MiB);
  EXPECT_EQ(p.summary.leaked_bytes, 2 * MiB);
  ASSERT_EQ(p.leaks.size(), 1u);
  const an::SiteGroup& g = p.leaks[0];
  EXPECT_EQ(g.kind, "leak");
  EXPECT_EQ(g.bytes, 2 * MiB);
  EXPECT_EQ(g.count, 1u);
  EXPECT_EQ(g.api, gf::Api::kCuMemMap);
  EXPECT_EQ(g.memory, gf::MemoryKind::kPhysical);
  ASSERT_FALSE(g.stack.empty());
  EXPECT_EQ(g.stack[0].pc, kAppBase + 0x3000);  // stack 2: the cuMemMap
  ASSERT_FALSE(g.created_stack.empty());
  EXPECT_EQ(g.created_stack[0].pc, kAppBase + 0x1000);  // stack 1: the cuMemCreate
  ASSERT_EQ(p.address_space.size(), 1u);
  EXPECT_EQ(p.address_space[0].memory, gf::MemoryKind::kMapping);
  const auto leak = an::report_json(r)["leaks"][0];
  EXPECT_EQ(leak["api"], "cuMemMap");
  ASSERT_TRUE(leak.contains("created_stack"));
  EXPECT_EQ(leak["created_stack"][0]["pc"], an::pc_hex(kAppBase + 0x1000));
  EXPECT_NE(an::report_text(r).find("created by cuMemCreate at:"), std::string::npos);
}

// One handle at two addresses, the second mapping part of it: alive until both are unmapped.
TEST(Replay, VmmHandleLivesWhileAnyMappingOfItDoes) {
  TempDir dir;
  TraceBuilder t = base_trace();
  const uint64_t a = 0x7f0000000000, b = 0x7f1000000000;
  vmm_create(t, 0x100, 4 * MiB, 1);
  vmm_map(t, a, 4 * MiB, 0x100, 2);
  vmm_map(t, b, 2 * MiB, 0x100, 2);
  vmm_release(t, 0x100);
  vmm_unmap(t, a, 4 * MiB);
  t.alloc(0xa000000, 2 * MiB, 1);  // 6 MiB live: the handle still is, through b
  vmm_unmap(t, b, 2 * MiB);
  t.free(0xa000000);
  t.end();
  const auto r = analyze(t, dir);
  const auto& p = r.processes[0];
  EXPECT_EQ(p.summary.peak_bytes, 6 * MiB);
  expect_all_freed(p);
}

// Unmapped before its release, a handle is freed at the release, not at the unmap.
TEST(Replay, VmmHandleUnmappedFirstLivesUntilReleased) {
  TempDir dir;
  TraceBuilder t = base_trace();
  vmm_create(t, 0x200, 4 * MiB, 1);
  vmm_map(t, 0x7f0000000000, 4 * MiB, 0x200, 2);
  vmm_unmap(t, 0x7f0000000000, 4 * MiB);
  t.alloc(0xb000000, 1 * MiB, 1);  // 5 MiB live: unmapped, not released
  vmm_release(t, 0x200);
  t.free(0xb000000);
  t.end();
  const auto r = analyze(t, dir);
  const auto& p = r.processes[0];
  EXPECT_EQ(p.summary.peak_bytes, 5 * MiB);
  expect_all_freed(p);
}

// A trace whose mappings do not name their handle (stream 0) keeps the release as the free.
TEST(Replay, VmmMappingWithoutItsHandleLeavesTheReleaseTheFree) {
  TempDir dir;
  TraceBuilder t = base_trace();
  vmm_create(t, 0x100, 2 * MiB, 1);
  vmm_map(t, 0x7f0000000000, 2 * MiB, 0, 2);
  vmm_release(t, 0x100);
  vmm_create(t, 0x101, 2 * MiB, 1);
  t.end();
  const auto r = analyze(t, dir);
  const auto& p = r.processes[0];
  EXPECT_EQ(p.summary.peak_bytes, 2 * MiB);
  ASSERT_EQ(p.leaks.size(), 1u);
  EXPECT_EQ(p.leaks[0].api, gf::Api::kCuMemCreate);
  EXPECT_TRUE(p.leaks[0].created_stack.empty());
}

// Format 2.0 (a format 3 trace cut inside a block loses the block: trace_reader_test).
TEST(Replay, TruncatedFinalRecordIsReadUpToTheCut) {
  TempDir dir;
  TraceBuilder t = base_trace(100, gf::kVersion2_0);
  t.alloc(0x1000, 64, 1).alloc(0x2000, 128, 1);
  std::string path = t.write(dir.file("cut.trace"), t.bytes().size() - 3);
  auto r = an::analyze({path});
  EXPECT_TRUE(r.processes[0].truncated);
  EXPECT_FALSE(r.processes[0].clean_exit);
  EXPECT_EQ(r.processes[0].summary.allocations, 1u);
  // No End: the process did not exit, so what was alive when the trace stopped is not leaked.
  EXPECT_EQ(r.processes[0].integrity.status, gf::IntegrityStatus::kIncomplete);
  EXPECT_EQ(r.summary.leaked_bytes, 0u);
  EXPECT_EQ(r.summary.alive_at_trace_end_bytes, 64u);
}

TEST(Replay, UnknownRecordsAreSkipped) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.raw(99, "something new").alloc(0x1000, 64, 1).end();
  auto r = analyze(t, dir);
  EXPECT_EQ(r.processes[0].stats.unknown_records, 1u);
  EXPECT_EQ(r.summary.leaked_bytes, 64u);
}

TEST(Replay, BadTracesThrowOneLineErrors) {
  TempDir dir;
  auto expect_error = [&](const std::string& path, const char* needle) {
    try {
      an::analyze({path});
      ADD_FAILURE() << "no error for " << path;
    } catch (const an::TraceError& e) {
      std::string what = e.what();
      EXPECT_EQ(what.rfind(path, 0), 0u) << what;
      EXPECT_NE(what.find(needle), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos);
    }
  };
  TraceBuilder empty_builder;
  expect_error(empty_builder.write(dir.file("empty"), 0), "empty");
  TraceBuilder newer = base_trace();
  newer.header_version(9, 0);
  expect_error(newer.write(dir.file("newer")), "not supported");
  // Malformed records in a 2.0 file (in format 3 they damage their block: trace_reader_test).
  TraceBuilder garbage = base_trace(100, gf::kVersion2_0);
  garbage.append_bytes(std::string_view("\0\0\0\0", 4)).alloc(0x1000, 1);
  expect_error(garbage.write(dir.file("garbage")), "malformed");
  TraceBuilder bad_kind = base_trace(100, gf::kVersion2_0);
  gf::AllocRecord a;
  a.kind = static_cast<gf::MemoryKind>(42);
  bad_kind.add(a).end();
  expect_error(bad_kind.write(dir.file("badkind")), "malformed");
  // Format 2.0: a hot record's fixed payload one byte short (its time and thread still there).
  for (auto type : {gf::RecordType::kAlloc, gf::RecordType::kFree, gf::RecordType::kTorchEvent}) {
    const size_t size = gf::fixed_payload_size(type);
    TraceBuilder short_fixed = base_trace(100, gf::kVersion2_0);
    short_fixed.alloc(0x1000, 64)
        .raw(static_cast<uint8_t>(type), std::string(size - 1, '\x01'))
        .end();
    const std::string name = "short" + std::to_string(static_cast<int>(type));
    expect_error(short_fixed.write(dir.file(name)), "malformed record");
  }
  TraceBuilder three = base_trace();
  three.header_version(4, 0);
  expect_error(three.write(dir.file("three")), "version 4.0 is not supported");
  expect_error(dir.file("missing"), "cannot open");
  TraceBuilder zeroed = base_trace(100, gf::kVersion2_0);
  zeroed.module(std::string_view("/lib/lib\0\0\0\0.so", 15), 0x900000, 0x1000).end();
  expect_error(zeroed.write(dir.file("zeroed")), "NUL byte");
}

TEST(Replay, SeveralProcessesAreSummed) {
  TempDir dir;
  TraceBuilder a = base_trace(1), b = base_trace(2);
  a.alloc(0x1000, 100, 1).end();
  b.alloc(0x1000, 300, 2).alloc(0x2000, 50, 2).free(0x2000).end();
  auto r = an::analyze({a.write(dir.file("a")), b.write(dir.file("b"))});
  ASSERT_EQ(r.processes.size(), 2u);
  EXPECT_EQ(r.summary.allocations, 3u);
  EXPECT_EQ(r.summary.frees, 1u);
  EXPECT_EQ(r.summary.leaked_bytes, 400u);
  EXPECT_EQ(r.summary.peak_bytes, 100u + 350u);
  auto leaks = an::all_leaks(r, false);
  ASSERT_EQ(leaks.size(), 2u);
  EXPECT_EQ(leaks[0]->pid, 2u);
}

TEST(Replay, JsonHasTheContractKeys) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0x1000, 4 * MiB, 1).failed(1 << 30, 2, 2).end();
  auto j = an::report_json(analyze(t, dir));
  EXPECT_EQ(j["schema"], "gpumemshim-report/1");
  for (const char* k : {"processes", "summary", "leaks", "failures", "address_space", "growth",
                        "fragmentation", "recommendations"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"allocations", "frees", "failed_allocations", "unmatched_frees",
                        "peak_bytes", "leaked_bytes", "by_kind"})
    EXPECT_TRUE(j["summary"].contains(k)) << k;
  for (const char* k : {"pid", "ppid", "rank", "host", "command_line", "trace", "truncated",
                        "clean_exit", "duration_s", "summary", "devices"})
    EXPECT_TRUE(j["processes"][0].contains(k)) << k;
  const auto& leak = j["leaks"][0];
  for (const char* k : {"id", "kind", "bytes", "count", "api", "memory", "device", "pid", "stack"})
    EXPECT_TRUE(leak.contains(k)) << k;
  EXPECT_EQ(leak["bytes"], 4 * MiB);
  EXPECT_EQ(leak["memory"], "device");
  for (const char* k : {"function", "file", "line", "module", "python"})
    EXPECT_TRUE(leak["stack"][0].contains(k)) << k;
  EXPECT_EQ(j["failures"][0]["size"], 1u << 30);
  EXPECT_EQ(j["summary"]["by_kind"]["device"]["peak_bytes"], 4 * MiB);
  std::string text = an::report_text(analyze(t, dir));
  EXPECT_NE(text.find("LEAK 4.00 MiB (4194304 bytes) in 1 allocation via cudaMalloc"),
            std::string::npos)
      << text;
}

TEST(Units, HumanBytes) {
  EXPECT_EQ(an::human_bytes(0), "0 B");
  EXPECT_EQ(an::human_bytes(1023), "1023 B");
  EXPECT_EQ(an::human_bytes(1536 * 1024), "1.50 MiB");
  EXPECT_EQ(an::human_bytes(4ull << 30), "4.00 GiB");
}

TEST(Replay, TorchBlocksLeakAndSegmentsAreCached) {
  TempDir dir;
  using A = gf::TorchAction;
  TraceBuilder t = base_trace();
  t.alloc(0xa000000, 20 * MiB, 1);  // the allocator's segment, through the runtime hooks
  t.torch(A::kSegmentAlloc, 0xa000000, 20 * MiB, 1);
  for (uint64_t i = 0; i < 3; ++i) {
    t.torch(A::kAlloc, 0xa000000 + i * MiB, 512, 2);
    t.torch(A::kFreeRequested, 0xa000000 + i * MiB, 512, 2);
    t.torch(A::kFreeCompleted, 0xa000000 + i * MiB, 512, 2);
  }
  t.torch(A::kAlloc, 0xa800000, 4096, 2).torch(A::kAlloc, 0xa900000, 8192, 2);  // kept: one site
  t.torch(A::kAlloc, 0xaa00000, 100, 1)
      .torch(A::kFreeRequested, 0xaa00000, 100, 1);  // not completed
  t.torch(A::kOom, 1000, 1ull << 40);
  t.torch(static_cast<A>(42), 0xa000000, 1);  // a later action: ignored
  t.end();
  an::Report r = analyze(t, dir);
  const auto& p = r.processes[0];
  const an::TorchCounters& tc = p.summary.torch;
  EXPECT_EQ(tc.events, 16u);
  EXPECT_EQ(tc.allocs, 6u);
  EXPECT_EQ(tc.frees, 3u);
  EXPECT_EQ(tc.segment_allocs, 1u);
  EXPECT_EQ(tc.segment_frees, 0u);
  EXPECT_EQ(tc.ooms, 1u);
  EXPECT_EQ(tc.live_blocks, 3u);
  EXPECT_EQ(tc.live_block_bytes, 4096u + 8192u + 100u);
  // Tensor blocks are leaks grouped by site; the segment is cached, not leaked.
  EXPECT_EQ(p.summary.leaked_bytes, 4096u + 8192u + 100u);
  EXPECT_EQ(p.summary.leaked_allocations, 3u);
  ASSERT_EQ(p.leaks.size(), 3u);
  EXPECT_EQ(p.leaks[0].kind, "cached");
  EXPECT_EQ(p.leaks[0].bytes, 20 * MiB);
  EXPECT_FALSE(p.leaks[0].torch_block);
  EXPECT_EQ(p.leaks[1].kind, "leak");
  EXPECT_TRUE(p.leaks[1].torch_block);
  EXPECT_EQ(p.leaks[1].bytes, 4096u + 8192u);
  EXPECT_EQ(p.leaks[1].count, 2u);
  ASSERT_FALSE(p.leaks[1].stack.empty());
  EXPECT_EQ(p.leaks[1].stack[0].pc, kAppBase + 0x3000);
  EXPECT_EQ(p.leaks[2].bytes, 100u);
  EXPECT_NE(p.leaks[1].id, p.leaks[2].id);
  // Torch blocks do not count as device memory (their segments do).
  EXPECT_EQ(p.summary.peak_bytes, 20 * MiB);
  // The report: api and memory of torch blocks, the torch summary, cached excluded from all_leaks.
  auto leaks = an::all_leaks(r, /*include_suppressed=*/false);
  ASSERT_EQ(leaks.size(), 2u);
  std::string json = an::report_json(r).dump();
  EXPECT_NE(json.find("\"torch.alloc\""), std::string::npos);
  EXPECT_NE(json.find("\"torch_block\""), std::string::npos);
  EXPECT_NE(json.find("\"cached\""), std::string::npos);
  EXPECT_NE(json.find("\"live_block_bytes\""), std::string::npos);
}

TEST(Replay, WithoutTorchEventsSegmentsStayLeaks) {
  TempDir dir;
  TraceBuilder t = base_trace();
  t.alloc(0xa000000, 20 * MiB, 1);
  t.end();
  an::Report r = analyze(t, dir);
  ASSERT_EQ(r.processes[0].leaks.size(), 1u);
  EXPECT_EQ(r.processes[0].leaks[0].kind, "leak");
  EXPECT_EQ(r.processes[0].summary.torch.events, 0u);
}

TEST(Replay, ALateFlushedThreadIsStillReplayedInTimeOrder) {
  // Thread 2 frees 0x5000 at 2 us, but its batch reaches the file only after thread 1 allocated the
  // same address again (3 us) and 2 s of other events. Replayed in file order the late free would
  // take the new allocation with it; in time order the 2 MiB allocation is still live at the end.
  TempDir dir;
  TraceBuilder t = base_trace();
  auto alloc = [&](uint64_t time, uint64_t address, uint64_t size) {
    gf::AllocRecord r;
    r.time_ns = time;
    r.thread_id = 1;
    r.api = gf::Api::kCudaMalloc;
    r.kind = gf::MemoryKind::kDevice;
    r.address = address;
    r.size = size;
    r.stack_id = 1;
    t.add(r);
  };
  auto free = [&](uint64_t time, uint64_t thread, uint64_t address) {
    gf::FreeRecord r;
    r.time_ns = time;
    r.thread_id = thread;
    r.api = gf::Api::kCudaFree;
    r.kind = gf::MemoryKind::kDevice;
    r.address = address;
    t.add(r);
  };
  alloc(1000, 0x5000, 1 * MiB);
  alloc(3000, 0x5000, 2 * MiB);
  for (uint64_t i = 0; i < 10000; ++i) {
    alloc(10'000 + i * 200'000, 0x100000, 4096);
    free(10'000 + i * 200'000 + 100, 1, 0x100000);
  }
  free(2000, 2, 0x5000);
  t.at(2'100'000'000).end();
  auto j = an::report_json(analyze(t, dir));
  EXPECT_EQ(j["summary"]["frees"], 10001);
  EXPECT_EQ(j["summary"]["unmatched_frees"], 0);
  ASSERT_EQ(j["leaks"].size(), 1u) << j["leaks"].dump();
  EXPECT_EQ(j["leaks"][0]["bytes"], 2 * MiB);
  EXPECT_EQ(j["summary"]["by_kind"]["device"]["peak_bytes"], 2 * MiB + 4096);
}

TEST(Replay, FlushMarksKeepAOneThreadTracesOrderWindowSmall) {
  // One thread, 40 000 alloc/free pairs over 2 s (25 us apart), a flush mark every 1000 records as
  // the shim's flusher writes them (format 1.1). Without the marks the loader holds its idle
  // window (1 s: 40 000 records) to be sure no other thread brings older events; with them, two
  // flushes. Same report either way.
  TempDir dir;
  auto build = [](bool marks) {
    TraceBuilder t = base_trace();
    uint64_t time = 1000;
    for (uint64_t i = 0; i < 40'000; ++i) {
      const bool leak = i % 5000 == 4999;
      const uint64_t address = leak ? 0x80000000 + i * MiB : 0x100000 + (i % 64) * MiB;
      t.at(time).alloc(address, 4096 + i % 7, 1);
      time += 25'000;
      if (!leak) t.at(time).free(address);
      time += 25'000;
      if (marks && i % 500 == 499) t.add(gf::FlushRecord{time - 25'000});
    }
    t.at(time).end();
    return t;
  };
  an::LoadedTrace with = an::load_trace(build(true).write(dir.file("marks.trace")));
  an::LoadedTrace without = an::load_trace(build(false).write(dir.file("none.trace")));
  EXPECT_EQ(with.stats.by_type[static_cast<uint8_t>(gf::RecordType::kFlush)], 80u);
  EXPECT_LE(with.stats.max_order_window, 2 * 1000u);
  EXPECT_GE(without.stats.max_order_window, 40'000u);
  EXPECT_EQ(with.stats.unknown_records, 0u);
  EXPECT_EQ(with.replay.summary().allocations, 40'000u);
  EXPECT_EQ(with.replay.summary().frees, without.replay.summary().frees);
  EXPECT_EQ(with.replay.live().size(), 8u);
  EXPECT_EQ(without.replay.live().size(), 8u);
  EXPECT_EQ(with.replay.summary().peak_bytes, without.replay.summary().peak_bytes);
  // A trace too small for a round before its end: everything waited.
  TraceBuilder small = base_trace();
  small.alloc(0x1000, 64).free(0x1000).end();
  EXPECT_EQ(an::load_trace(small.write(dir.file("small.trace"))).stats.max_order_window, 2u);
}

namespace {

// The report of one trace loaded on `cores` cores (load.h: with or without the replay thread and,
// format 3, read threads).
std::string report_of(const std::string& path, unsigned cores) {
  an::LoadedTrace trace = an::load_trace(path, {}, cores);
  an::Report r;
  r.processes.push_back(an::analyze_trace(trace, an::AnalyzeOptions{}, nullptr));
  return an::report_json(r).dump();
}

// Four threads' batches, flush marks, steps, torch blocks, failures, cudaMemGetInfo samples and
// a backward pass whose autograd-thread allocations take the caller's stack: more events than
// a few of the replay thread's batches. Hot records laid out as `version` has them.
TraceBuilder mix_trace(gf::Version version) {
  TraceBuilder t = base_trace(100, version);
  t.stack(7, {kAppBase + 0x4000});
  uint64_t time = 1000;
  std::vector<std::vector<uint8_t>> pending(4);
  auto put = [&](uint64_t thread, const auto& record) {
    std::vector<uint8_t> buf(256);
    size_t n = gf::encode_for(version, buf.data(), buf.size(), record);
    pending[thread].insert(pending[thread].end(), buf.begin(),
                           buf.begin() + static_cast<std::ptrdiff_t>(n));
  };
  for (uint64_t i = 0; i < 60'000; ++i) {
    time += 300 + i % 700;
    const uint64_t thread = i % 4;
    const uint64_t address = 0x100000 + (i % 97) * MiB + thread * (1ull << 40);
    if (i % 5000 == 0)
      put(0, gf::MarkerRecord{time, 0, gf::MarkerKind::kStep, "step", 0});
    else if (i % 20000 == 10)
      put(0, gf::MarkerRecord{time, 0, gf::MarkerKind::kRangePush, an::kBackwardRange, 2});
    else if (i % 20000 == 900)
      put(0, gf::MarkerRecord{time, 0, gf::MarkerKind::kRangePop, an::kBackwardRange, 2});
    else if (i % 1000 == 3)
      put(thread, gf::AllocFailedRecord{time, thread, 0, 0, gf::Api::kCudaMalloc,
                                        gf::MemoryKind::kDevice, 64 * MiB, 2, 1});
    else if (i % 1000 == 4)
      put(thread, gf::MemInfoRecord{time, 0, 10 * MiB * (i % 7), 80ull << 30});
    else if (thread == 3)
      put(thread, gf::TorchEventRecord{
                      time, thread, 0, 0,
                      (i / 4) % 2 ? gf::TorchAction::kFreeCompleted : gf::TorchAction::kAlloc,
                      address, 4096 + i % 13, 7});
    else if ((i / 4) % 2 == 0 && i % 3001 != 0)  // the pair's allocation (every ~3000th leaks)
      put(thread, gf::AllocRecord{time, thread, 0, 0, gf::Api::kCudaMalloc, gf::MemoryKind::kDevice,
                                  address, 1 * MiB + i % 4096, thread == 1 ? 7u : 1u});
    else
      put(thread, gf::FreeRecord{time, thread, -1, 0, gf::Api::kCudaFree, gf::MemoryKind::kDevice,
                                 address, 0, 0});
    if (i % 8000 == 7999) {  // a flush: the threads' batches, then the mark
      for (uint64_t k = 4; k-- > 0;) {
        t.append_bytes({reinterpret_cast<const char*>(pending[k].data()), pending[k].size()});
        pending[k].clear();
      }
      t.add(gf::FlushRecord{time});
    }
  }
  for (auto& p : pending) t.append_bytes({reinterpret_cast<const char*>(p.data()), p.size()});
  t.at(time + 1000).end();
  return t;
}

std::string error_of(const std::string& path, unsigned cores) {
  try {
    an::load_trace(path, {}, cores);
  } catch (const an::TraceError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Replay, AReplayThreadGivesTheSameReport) {
  TempDir dir;
  TraceBuilder t = mix_trace(gf::kVersion);
  const std::string path = t.write(dir.file("mix.trace"));
  const std::string one = report_of(path, 1);
  for (unsigned cores : {2u, 3u, 5u}) EXPECT_EQ(report_of(path, cores), one) << cores << " cores";
  EXPECT_NE(one.find("\"failed_allocations\":60"), std::string::npos) << one.substr(0, 2000);

  // A malformed timed record of a 2.0 file: the same one-line error either way (the reader decodes
  // it).
  TraceBuilder bad = base_trace(100, gf::kVersion2_0);
  for (uint64_t i = 0; i < 20'000; ++i)
    bad.alloc(0x100000 + i * 4096, 64).free(0x100000 + i * 4096);
  bad.raw(static_cast<uint8_t>(gf::RecordType::kAlloc),
          std::string_view("\x05\x01\x00\x00\x01\x09", 6));
  for (uint64_t i = 0; i < 20'000; ++i) bad.alloc(0x100000 + i * 4096, 64);
  const std::string bad_path = bad.write(dir.file("bad.trace"));
  const std::string error = error_of(bad_path, 1);
  EXPECT_NE(error.find("malformed record"), std::string::npos) << error;
  EXPECT_EQ(error_of(bad_path, 2), error);

  // A Python stack defined after an autograd-thread allocation looked for it: the loader reads the
  // file again, buffered; same report either way.
  TraceBuilder late = base_trace();
  late.stack(7, {kAppBase + 0x4000});
  late.add(
      gf::MarkerRecord{late.now() + 1000, 1, gf::MarkerKind::kRangePush, an::kBackwardRange, 2});
  late.add(gf::AllocRecord{late.now() + 2000, 2, 0, 0, gf::Api::kCudaMalloc,
                           gf::MemoryKind::kDevice, 0x900000, 3 * MiB, 7});
  for (uint64_t i = 0; i < 20'000; ++i)
    late.at(late.now() + 10'000 + i * 1000).alloc(0x100000, 64).free(0x100000);
  const gf::PyFrameRef frame{1234, 2, 1};
  late.add(gf::PyStackRecord{7, 1, &frame});
  late.end();
  const std::string late_path = late.write(dir.file("late.trace"));
  EXPECT_EQ(report_of(late_path, 3), report_of(late_path, 1));
}

namespace {

// A report's JSON without what legitimately differs between two encodings of the same events.
nlohmann::json without_file_fields(nlohmann::json j) {
  if (j.is_object()) {
    for (const char* key : {"trace", "trace_bytes", "format_version"}) j.erase(key);
    // "unchecked (format 1)" / "unchecked (format 2)": the integrity's name carries the version.
    if (j.contains("integrity") && j["integrity"].is_object()) j["integrity"].erase("status");
    for (auto& [key, value] : j.items()) value = without_file_fields(value);
  } else if (j.is_array()) {
    for (auto& value : j) value = without_file_fields(value);
  }
  return j;
}

}  // namespace

// Format 2.0's fixed-layout hot records and 1.1's varint ones: the same events, the same report,
// with and without the replay thread, and through analyze().
TEST(Replay, Format11And20GiveTheSameReport) {
  TempDir dir;
  const std::string v11 = mix_trace(gf::kVersion1_1).write(dir.file("v11.trace"));
  const std::string v20 = mix_trace(gf::kVersion2_0).write(dir.file("v20.trace"));
  auto json_of = [](const std::string& path, unsigned cores) {
    an::LoadedTrace trace = an::load_trace(path, {}, cores);
    an::Report r;
    r.processes.push_back(an::analyze_trace(trace, an::AnalyzeOptions{}, nullptr));
    return an::report_json(r);
  };
  const nlohmann::json a = json_of(v11, 1), b = json_of(v20, 1);
  EXPECT_EQ(a["processes"][0]["format_version"], "1.1");
  EXPECT_EQ(b["processes"][0]["format_version"], "2.0");
  EXPECT_GT(b["processes"][0]["trace_bytes"].get<uint64_t>(),
            a["processes"][0]["trace_bytes"].get<uint64_t>());
  EXPECT_GT(a["processes"][0]["summary"]["allocations"].get<uint64_t>(), 20'000u);
  EXPECT_EQ(without_file_fields(a).dump(), without_file_fields(b).dump());
  EXPECT_EQ(without_file_fields(json_of(v20, 2)).dump(), without_file_fields(a).dump());
  // The whole analysis (analyze(): the CLI's path), too.
  EXPECT_EQ(without_file_fields(an::report_json(an::analyze({v11}))).dump(),
            without_file_fields(an::report_json(an::analyze({v20}))).dump());

  // A thread's batch 2 s late in the file: the loader orders by the fixed layout's times too
  // (in 1.1 the late free would otherwise take the address's second allocation with it).
  auto late = [&](gf::Version version, const char* name) {
    TraceBuilder t = base_trace(100, version);
    t.at(1000).alloc(0x5000, 1 * MiB, 1).at(3000).alloc(0x5000, 2 * MiB, 1);
    for (uint64_t i = 0; i < 10000; ++i)
      t.at(10'000 + i * 200'000)
          .alloc(0x100000, 4096, 2)
          .at(10'000 + i * 200'000 + 100)
          .free(0x100000);
    gf::FreeRecord f;
    f.time_ns = 2000;
    f.thread_id = 2;
    f.api = gf::Api::kCudaFree;
    f.kind = gf::MemoryKind::kDevice;
    f.address = 0x5000;
    t.add(f);
    t.at(2'100'000'000).end();
    return json_of(t.write(dir.file(name)), 1);
  };
  const nlohmann::json la = late(gf::kVersion1_1, "late11.trace"),
                       lb = late(gf::kVersion2_0, "late20.trace");
  EXPECT_EQ(lb["processes"][0]["summary"]["unmatched_frees"], 0);
  EXPECT_EQ(lb["processes"][0]["summary"]["frees"], 10001);
  EXPECT_EQ(without_file_fields(la).dump(), without_file_fields(lb).dump());
}

TEST(Replay, ManyRawSitesEachKeepTheirOwnBytes) {
  // Thousands of (stack, api, kind, tensor block) sites, so the site table grows several times
  // while sites are being added; each keeps its bytes and its device, and the same key is always
  // the same site.
  an::Replay rp;
  constexpr uint64_t kStacks = 5000;
  uint64_t address = 0x100000000;
  for (int round = 0; round < 2; ++round)
    for (uint64_t s = 0; s < kStacks; ++s) {
      gf::AllocRecord a;
      a.time_ns = 1000 + round * kStacks + s;
      a.api = s % 3 == 0 ? gf::Api::kCudaMallocAsync : gf::Api::kCudaMalloc;
      a.kind = s % 3 == 0 ? gf::MemoryKind::kPool : gf::MemoryKind::kDevice;
      a.device = round == 1 && s % 7 == 0 ? 1 : 0;
      a.address = address += 0x1000;
      a.size = 1 + s;
      a.stack_id = 0x9E3779B97F4A7C15ull * (s + 1);  // hashes, as the shim's stack ids
      rp.alloc(a);
      gf::TorchEventRecord b;
      b.time_ns = a.time_ns;
      b.action = gf::TorchAction::kAlloc;
      b.address = a.address;
      b.size = 2 * (1 + s);
      b.stack_id = a.stack_id;  // the same stack, another site: a tensor block
      rp.torch(b);
    }
  ASSERT_EQ(rp.sites().size(), 2 * kStacks);
  std::map<uint64_t, uint64_t> stack_number;
  for (uint64_t s = 0; s < kStacks; ++s) stack_number[0x9E3779B97F4A7C15ull * (s + 1)] = s;
  for (uint32_t i = 0; i < rp.sites().size(); ++i) {
    const an::RawSite& site = rp.sites()[i];
    ASSERT_EQ(stack_number.count(site.stack_id), 1u);
    const uint64_t s = stack_number[site.stack_id];
    EXPECT_EQ(rp.site_live()[i], (site.torch_block ? 4 : 2) * (1 + s)) << i;
    EXPECT_EQ(rp.site_device(i), !site.torch_block && s % 7 == 0 ? -1 : 0) << i;
  }
}

// The step sampler behind growth, fed by the replay: at each kept point every site's series holds
// its live bytes at the last step marker that point covers. Busy steps (every site changes: the
// sampler compares all of them, and the replay hands it only the steps it keeps) alternate with
// quiet ones (a few changes: touches), the stride doubles past 512 steps, and the trace goes on
// after its last step, which is not a kept multiple: that step's bytes, not the end's, are shown.
TEST(Replay, StepSamplesHoldEachSitesBytesAtTheKeptSteps) {
  constexpr uint64_t kSites = 24, kSteps = 1503;
  an::Replay rp;
  std::vector<std::vector<uint64_t>> at_step(1);   // at_step[s]: bytes by site after step s
  std::map<uint64_t, std::vector<uint64_t>> live;  // site -> its live addresses
  uint64_t time = 1000, address = 0x100000000, seed = 7;
  auto random = [&seed](uint64_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (seed >> 33) % n;
  };
  auto change = [&](uint64_t site) {
    std::vector<uint64_t>& addresses = live[site];
    if (!addresses.empty() && random(2) == 0) {
      gf::FreeRecord f;
      f.time_ns = ++time;
      f.address = addresses.back();
      addresses.pop_back();
      rp.free(f);
      return;
    }
    gf::AllocRecord a;
    a.time_ns = ++time;
    a.address = address += 0x1000;
    a.size = 512 * (1 + random(8));
    a.stack_id = 0x9E3779B97F4A7C15ull * (site + 1);
    addresses.push_back(a.address);
    rp.alloc(a);
  };
  auto bytes_by_site = [&] {  // raw sites are numbered in first-seen order
    std::vector<uint64_t> v(rp.sites().size());
    for (uint32_t i = 0; i < v.size(); ++i) v[i] = rp.site_live()[i];
    return v;
  };
  for (uint64_t step = 1; step <= kSteps; ++step) {
    const bool busy = (step / 200) % 2 == 0 || step > kSteps - 20;  // busy at the end
    const uint64_t changes = busy ? 3 * kSites : random(3);
    for (uint64_t c = 0; c < changes; ++c) change(busy ? c % kSites : random(kSites));
    rp.marker(gf::MarkerRecord{++time, 1, gf::MarkerKind::kStep, "step", 0});
    at_step.push_back(bytes_by_site());
  }
  for (uint64_t c = 0; c < 5 * kSites; ++c) change(c % kSites);  // after the last step
  rp.finish();

  const an::SiteSampler& s = rp.growth_samples().step_samples();
  ASSERT_EQ(s.stride(), 4u) << "the test must thin twice";
  ASSERT_NE(kSteps % s.stride(), 0u);
  const std::vector<uint64_t> points = s.points();
  ASSERT_EQ(points.back(), kSteps);
  ASSERT_EQ(rp.sites().size(), kSites);
  for (uint32_t site = 0; site < kSites; ++site) {
    std::vector<uint64_t> expected;
    for (uint64_t p : points) expected.push_back(site < at_step[p].size() ? at_step[p][site] : 0);
    ASSERT_EQ(s.series(site), expected) << "site " << site;
  }
  EXPECT_NE(bytes_by_site(), at_step[kSteps]) << "the end must differ from the last step";
}

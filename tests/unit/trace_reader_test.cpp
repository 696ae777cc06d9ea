// The trace reader: what it delivers, in which order, what it counts, when it restarts.
#include "gpumemshim/format/trace_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "trace_builder.h"

namespace gf = gpumemshim::format;
using gpumemshim::testing::TempDir;
using gpumemshim::testing::TraceBuilder;

namespace {

template <typename Rec>
Rec event_at(uint64_t time, uint64_t thread, uint64_t address, gf::Api api) {
  Rec r;
  r.time_ns = time;
  r.thread_id = thread;
  r.api = api;
  r.address = address;
  return r;
}

gf::AllocRecord alloc_at(uint64_t time, uint64_t thread, uint64_t address) {
  auto r = event_at<gf::AllocRecord>(time, thread, address, gf::Api::kCudaMalloc);
  r.size = 100;
  return r;
}

gf::FreeRecord free_at(uint64_t time, uint64_t thread, uint64_t address) {
  return event_at<gf::FreeRecord>(time, thread, address, gf::Api::kCudaFree);
}

// Keeps what it is given: the events' times, the stacks, how often it restarted.
class Recorder final : public gf::TraceSink {
 public:
  std::vector<uint64_t> times;
  std::vector<uint64_t> stacks;
  int restarts = 0;
  bool refuse_python = false;

  void stack(const gf::StackRecord& r) override { stacks.push_back(r.id); }
  bool py_stack(const gf::PyStackRecord&) override { return !refuse_python; }
  void alloc(const gf::AllocRecord& r) override { times.push_back(r.time_ns); }
  void free(const gf::FreeRecord& r) override { times.push_back(r.time_ns); }
  void restart() override {
    ++restarts;
    times.clear();
    stacks.clear();
  }
};

// Two threads' batches, each in time order, the second thread's written after the first's.
TraceBuilder two_thread_batches(gf::Version version = gf::kVersion) {
  TraceBuilder t(version);
  t.stack(7, {0x1000});
  t.add(alloc_at(1000, 1, 0xa0)).add(free_at(3000, 1, 0xa0)).add(alloc_at(5000, 1, 0xb0));
  t.add(alloc_at(2000, 2, 0xc0)).add(free_at(4000, 2, 0xc0)).add(alloc_at(5000, 2, 0xd0));
  return t;
}

}  // namespace

TEST(TraceReader, DeliversEventsInTimeOrderTiesInFileOrder) {
  TempDir dir;
  gf::TraceReader reader(two_thread_batches().write(dir.file("t.trace")));
  Recorder sink;
  reader.read(sink);
  EXPECT_EQ(sink.times, (std::vector<uint64_t>{1000, 2000, 3000, 4000, 5000, 5000}));
  EXPECT_EQ(sink.stacks, std::vector<uint64_t>{7});
  EXPECT_EQ(sink.restarts, 0);
  const gf::TraceCounts& c = reader.counts();
  EXPECT_EQ(c.records, 7u);
  EXPECT_EQ(c.by_type[static_cast<uint8_t>(gf::RecordType::kAlloc)], 4u);
  EXPECT_EQ(c.allocs_by_api[static_cast<uint8_t>(gf::Api::kCudaMalloc)], 4u);
  EXPECT_EQ(c.bytes_by_api[static_cast<uint8_t>(gf::Api::kCudaMalloc)], 400u);
  EXPECT_EQ(c.frees_by_api[static_cast<uint8_t>(gf::Api::kCudaFree)], 2u);
  EXPECT_FALSE(c.truncated);
}

TEST(TraceReader, ASinkThatRefusesAPythonStackGetsEverythingAgainBuffered) {
  TempDir dir;
  TraceBuilder t = two_thread_batches();
  gf::PyFrameRef frame{1, 0, 0};
  t.add(gf::PyStackRecord{7, 1, &frame});
  gf::TraceReader reader(t.write(dir.file("t.trace")));
  Recorder sink;
  sink.refuse_python = true;
  reader.read(sink);
  EXPECT_EQ(sink.restarts, 1);  // and no more: a buffered read does not restart
  EXPECT_EQ(sink.times, (std::vector<uint64_t>{1000, 2000, 3000, 4000, 5000, 5000}));
  EXPECT_EQ(sink.stacks, std::vector<uint64_t>{7});
  EXPECT_EQ(reader.counts().records, 8u);           // counted once, not twice
  EXPECT_EQ(reader.counts().max_order_window, 6u);  // every event held
}

TEST(TraceReader, TimedEventsAreTheWholeHistoryInTimeOrder) {
  TempDir dir;
  gf::TraceReader reader(two_thread_batches().write(dir.file("t.trace")));
  std::vector<gf::TimedEvent> events = reader.timed_events();
  ASSERT_EQ(events.size(), 6u);
  EXPECT_TRUE(std::holds_alternative<gf::AllocRecord>(events[1]));
  EXPECT_EQ(std::get<gf::AllocRecord>(events[1]).thread_id, 2u);
  EXPECT_EQ(std::get<gf::FreeRecord>(events[2]).time_ns, 3000u);
}

// NVML samples (format 3.1) are timed events of a stream of their own: in time order with the
// threads' events, to the sink's process_memory and in timed_events().
TEST(TraceReader, ProcessMemorySamplesAreTimedEvents) {
  TempDir dir;
  TraceBuilder t = two_thread_batches();
  t.add(gf::ProcessMemoryRecord{2500, 0, gf::kProcessUsedKnown, 11, 22, 33});
  t.add(gf::ProcessMemoryRecord{500, 1, 0, 0, 44, 55});
  const std::string path = t.write(dir.file("t.trace"));
  class Samples final : public gf::TraceSink {
   public:
    std::vector<std::pair<uint64_t, int>> seen;  // time, device (-1: an allocation)
    void alloc(const gf::AllocRecord& r) override { seen.emplace_back(r.time_ns, -1); }
    void process_memory(const gf::ProcessMemoryRecord& r) override {
      seen.emplace_back(r.time_ns, r.device);
    }
  } sink;
  gf::TraceReader reader(path);
  reader.read(sink);
  using Seen = std::vector<std::pair<uint64_t, int>>;
  EXPECT_EQ(sink.seen, (Seen{{500, 1}, {1000, -1}, {2000, -1}, {2500, 0}, {5000, -1}, {5000, -1}}));
  EXPECT_EQ(reader.counts().by_type[static_cast<uint8_t>(gf::RecordType::kProcessMemory)], 2u);
  EXPECT_EQ(reader.counts().unknown_records, 0u);
  gf::TraceReader again(path);
  std::vector<gf::TimedEvent> events = again.timed_events();
  ASSERT_EQ(events.size(), 8u);
  ASSERT_TRUE(std::holds_alternative<gf::ProcessMemoryRecord>(events[0]));
  EXPECT_EQ(std::get<gf::ProcessMemoryRecord>(events[0]).device_total_bytes, 55u);
}

// Format 2.0: records without blocks.
TEST(TraceReader, ATruncatedLastRecordEndsTheRead) {
  TempDir dir;
  TraceBuilder t = two_thread_batches(gf::kVersion2_0);
  const size_t whole = t.view().size();
  t.add(alloc_at(6000, 1, 0xe0));
  gf::TraceReader reader(t.write(dir.file("t.trace"), whole + 5));
  Recorder sink;
  reader.read(sink);
  EXPECT_EQ(sink.times.size(), 6u);
  EXPECT_TRUE(reader.counts().truncated);
  EXPECT_EQ(reader.counts().truncated_at, whole);
}

TEST(TraceReader, ErrorsNameTheFile) {
  TempDir dir;
  TraceBuilder bad_magic = two_thread_batches();
  bad_magic.mutable_bytes()[0] = 'X';
  const std::string path = bad_magic.write(dir.file("bad.trace"));
  try {
    gf::TraceReader reader(path);
    FAIL() << "opened a file with a bad magic";
  } catch (const gf::TraceReadError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": not a gpumemshim trace (bad magic)");
  }

  TraceBuilder nul(gf::kVersion2_0);  // format 3 calls the block damaged (see below)
  nul.module(std::string_view("/lib/a\0b.so", 11), 0x1000, 0x100);
  gf::TraceReader reader(nul.write(dir.file("nul.trace")));
  Recorder sink;
  EXPECT_THROW(reader.read(sink), gf::TraceReadError);
}

// Format 3 decompresses up to 1 MiB of records on the reader's thread before the read and more on
// a producer thread ahead of it: both give every event, in order, and a complete verdict.
TEST(TraceReader, SmallAndLargeBlockStreamsReadAlike) {
  TempDir dir;
  for (const size_t pairs : {100u, 40000u}) {
    TraceBuilder t;
    t.blocks(256);
    t.stack(7, {0x1000});
    for (uint64_t i = 0; i < pairs; ++i) {
      const uint64_t thread = 1 + i % 2;
      t.add(alloc_at(1000 + 10 * i, thread, 0x100000 + i * 0x100));
      t.add(free_at(1005 + 10 * i, thread, 0x100000 + i * 0x100));
    }
    t.end();
    gf::TraceReader reader(t.write(dir.file("t.trace")));
    Recorder sink;
    reader.read(sink);
    EXPECT_EQ(reader.counts().raw_bytes > (1u << 20), pairs > 100) << pairs;
    EXPECT_EQ(reader.integrity().status, gf::IntegrityStatus::kComplete) << pairs;
    ASSERT_EQ(sink.times.size(), 2 * pairs);
    EXPECT_TRUE(std::is_sorted(sink.times.begin(), sink.times.end())) << pairs;
    EXPECT_EQ(sink.times.back(), 1005 + 10 * (pairs - 1));
  }
}

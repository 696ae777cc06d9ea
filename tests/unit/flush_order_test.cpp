// The shim's ordered flush (shim/record/flush_order.h): which records a cut takes, and the merge of
// the threads' batches against a stable sort of the same records.
#include "record/flush_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gpumemshim/format/encoder.h"
#include "gpumemshim/format/record_extent.h"

namespace gpumemshim::shim {
namespace {

namespace gf = gpumemshim::format;
using Bytes = std::vector<uint8_t>;

template <typename Record>
void put(Bytes& out, const Record& r) {
  uint8_t buf[4096];
  size_t n = gf::encode(buf, sizeof buf, r);
  ASSERT_GT(n, 0u);
  out.insert(out.end(), buf, buf + n);
}

// One thread's records; every kind of timed record and the untimed ones a thread writes.
struct Batch {
  Bytes bytes;
  uint64_t thread;
  void alloc(uint64_t t, uint64_t address) {
    put(bytes, gf::AllocRecord{t, thread, 0, 0, gf::Api::kCudaMalloc, gf::MemoryKind::kDevice,
                               address, 4096, 7});
  }
  void free(uint64_t t, uint64_t address) {
    put(bytes, gf::FreeRecord{t, thread, -1, 0, gf::Api::kCudaFree, gf::MemoryKind::kDevice,
                              address, 0, 0});
  }
  void marker(uint64_t t, const char* name) {
    put(bytes, gf::MarkerRecord{t, thread, gf::MarkerKind::kStep, name, 0});
  }
  void failed(uint64_t t) {
    put(bytes, gf::AllocFailedRecord{t, thread, 0, 0, gf::Api::kCudaMalloc, gf::MemoryKind::kDevice,
                                     1, 2, 0});
  }
  void meminfo(uint64_t t) { put(bytes, gf::MemInfoRecord{t, 0, 1, 2}); }
  void process_memory(uint64_t t) {
    put(bytes, gf::ProcessMemoryRecord{t, 0, gf::kProcessUsedKnown, 1, 2, 3});
  }
  void stack(uint64_t id) {
    uint64_t frames[2] = {0x401000, 0x402000 + thread};
    put(bytes, gf::StackRecord{id, 2, frames});
  }
};

struct Parsed {
  gf::RecordExtent extent;
  Bytes bytes;
};
std::vector<Parsed> parse(const uint8_t* p, size_t n) {
  std::vector<Parsed> out;
  size_t at = 0;
  while (at < n) {
    Parsed r;
    EXPECT_TRUE(gf::record_extent(p + at, n - at, r.extent)) << "at " << at;
    if (r.extent.size == 0) break;
    r.bytes.assign(p + at, p + at + r.extent.size);
    at += r.extent.size;
    out.push_back(std::move(r));
  }
  return out;
}

TEST(FlushOrder, RecordExtentReadsEveryTimedKindAndSkipsTheRest) {
  Batch b{{}, 42};
  b.alloc(10, 0x1000);
  b.stack(5);
  b.free(20, 0x1000);
  b.marker(30, "step");
  b.failed(40);
  b.meminfo(50);
  b.process_memory(60);
  std::vector<Parsed> rs = parse(b.bytes.data(), b.bytes.size());
  ASSERT_EQ(rs.size(), 7u);
  std::vector<bool> timed;
  std::vector<uint64_t> times;
  for (const Parsed& r : rs) {
    timed.push_back(r.extent.timed);
    if (r.extent.timed) times.push_back(r.extent.time_ns);
  }
  EXPECT_EQ(timed, (std::vector<bool>{true, false, true, true, true, true, true}));
  EXPECT_EQ(times, (std::vector<uint64_t>{10, 20, 30, 40, 50, 60}));
  gf::RecordExtent e;
  EXPECT_FALSE(gf::record_extent(b.bytes.data(), rs[0].extent.size - 1, e)) << "a cut record";
}

TEST(FlushOrder, ACutTakesTheRecordsMadeByItAndTheStacksBeforeTheFirstLaterOne) {
  Batch b{{}, 1};
  b.alloc(10, 0x1000);
  b.free(20, 0x1000);
  b.stack(9);  // defined for the allocation after it: goes with what precedes it
  size_t through_stack = b.bytes.size();
  b.alloc(30, 0x2000);
  b.free(40, 0x2000);
  EXPECT_EQ(bytes_made_by(b.bytes.data(), b.bytes.size(), 5), 0u);
  const size_t first = parse(b.bytes.data(), b.bytes.size())[0].extent.size;
  EXPECT_EQ(bytes_made_by(b.bytes.data(), b.bytes.size(), 10), first);
  EXPECT_EQ(bytes_made_by(b.bytes.data(), b.bytes.size(), 19), first);
  EXPECT_EQ(bytes_made_by(b.bytes.data(), b.bytes.size(), 20), through_stack);
  EXPECT_EQ(bytes_made_by(b.bytes.data(), b.bytes.size(), 25), through_stack);
  EXPECT_EQ(bytes_made_by(b.bytes.data(), b.bytes.size(), 40), b.bytes.size());
  // Bytes that do not parse (cannot happen in a ring, but the flusher must not stall on them).
  Bytes damaged = b.bytes;
  damaged.push_back(4);
  damaged.push_back(0x90);
  EXPECT_EQ(bytes_made_by(damaged.data(), damaged.size(), 25), through_stack);
  EXPECT_EQ(bytes_made_by(damaged.data(), damaged.size(), 45), damaged.size());
}

// The reference: each batch cut into groups (the untimed records before a timed one, and it; the
// untimed ones after the last timed one last), stably sorted by (time, batch).
Bytes reference_merge(const std::vector<Batch>& batches) {
  struct Group {
    uint64_t time;
    size_t batch;
    Bytes bytes;
  };
  std::vector<Group> groups;
  for (size_t i = 0; i < batches.size(); ++i) {
    Group g{UINT64_MAX, i, {}};
    for (const Parsed& r : parse(batches[i].bytes.data(), batches[i].bytes.size())) {
      g.bytes.insert(g.bytes.end(), r.bytes.begin(), r.bytes.end());
      if (r.extent.timed) {
        g.time = r.extent.time_ns;
        groups.push_back(std::move(g));
        g = Group{UINT64_MAX, i, {}};
      }
    }
    if (!g.bytes.empty()) groups.push_back(std::move(g));
  }
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    return a.time != b.time ? a.time < b.time : a.batch < b.batch;
  });
  Bytes out;
  for (const Group& g : groups) out.insert(out.end(), g.bytes.begin(), g.bytes.end());
  return out;
}

Bytes merge(const std::vector<Batch>& batches) {
  std::vector<ThreadBatch> tb;
  size_t total = 0;
  for (const Batch& b : batches) {
    tb.push_back(ThreadBatch{b.bytes.data(), b.bytes.size()});
    total += b.bytes.size();
  }
  std::vector<MergeCursor> cursors(batches.size());
  Bytes out(total + 1, 0xEE);
  size_t n = merge_by_time(tb.data(), tb.size(), cursors.data(), out.data());
  EXPECT_EQ(n, total);
  EXPECT_EQ(out[total], 0xEE) << "wrote past the batches' total";
  out.resize(n);
  return out;
}

TEST(FlushOrder, MergeEqualsAStableSortOfEachTimedRecordWithTheStacksBeforeIt) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 300; ++round) {
    const size_t threads = 1 + rng() % 9;
    std::vector<Batch> batches;
    for (size_t t = 0; t < threads; ++t) {
      Batch b{{}, 100 + t};
      uint64_t time = rng() % 50;
      const size_t records = rng() % 40;  // some threads bring nothing
      for (size_t r = 0; r < records; ++r) {
        if (rng() % 5 == 0) b.stack(rng());
        time += rng() % 4;  // equal times across and within threads
        switch (rng() % 6) {
          case 0:
            b.free(time, r);
            break;
          case 1:
            b.marker(time, "m");
            break;
          case 2:
            b.failed(time);
            break;
          case 3:
            b.meminfo(time);
            break;
          default:
            b.alloc(time, r);
            break;
        }
      }
      if (rng() % 4 == 0) b.stack(rng());  // a stack written last, its event not yet
      batches.push_back(std::move(b));
    }
    ASSERT_EQ(merge(batches), reference_merge(batches)) << "round " << round;
  }
}

TEST(FlushOrder, AThreadsRecordsKeepTheirOrderEvenWhenItsTimesGoBack) {
  // Thread 1 wrote 30 before 20 (a record made earlier, buffered later): its order stands; the
  // others' records fall around it by time.
  Batch a{{}, 1}, b{{}, 2};
  a.alloc(10, 1);
  a.alloc(30, 2);
  a.alloc(20, 3);
  a.alloc(40, 4);
  b.alloc(15, 5);
  b.alloc(25, 6);
  b.alloc(35, 7);
  Bytes out = merge({a, b});
  std::vector<uint64_t> times;
  for (const Parsed& r : parse(out.data(), out.size())) times.push_back(r.extent.time_ns);
  EXPECT_EQ(times, (std::vector<uint64_t>{10, 15, 25, 30, 20, 35, 40}));
}

TEST(FlushOrder, EqualTimesGoToTheEarlierBatchAndNothingIsLost) {
  Batch a{{}, 1}, b{{}, 2}, empty{{}, 3};
  b.alloc(5, 0xb0);
  a.alloc(5, 0xa0);
  a.stack(77);
  a.free(5, 0xa0);
  b.free(5, 0xb0);
  Bytes out = merge({empty, a, b});
  std::vector<uint64_t> threads;
  for (const Parsed& r : parse(out.data(), out.size()))
    threads.push_back(r.bytes[0] == static_cast<uint8_t>(gf::RecordType::kStack) ? 0 : r.bytes[10]);
  // a's alloc, a's stack + free (a ties with b and a comes first), then b's two
  EXPECT_EQ(threads, (std::vector<uint64_t>{1, 0, 1, 2, 2}));
  EXPECT_TRUE(merge({}).empty());
  EXPECT_TRUE(merge({empty}).empty());
}

}  // namespace
}  // namespace gpumemshim::shim

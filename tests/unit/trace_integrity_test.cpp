// Format 3's integrity: what the reader says of a trace that is whole, cut, damaged or that the
// shim could not finish writing; and that no damage changes what is read without saying so.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpumemshim/format/block.h"
#include "gpumemshim/format/trace_reader.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace gf = gpumemshim::format;
using gpumemshim::testing::TempDir;
using gpumemshim::testing::TraceBuilder;

namespace {

// 8 blocks of 10 records (the last holds the End): stacks, allocations, frees, torch events,
// markers.
TraceBuilder sample(gf::BlockCodec codec = gf::BlockCodec::kLz4) {
  TraceBuilder t;
  t.blocks(10, codec);
  t.process(42, "train.py").device(0, 80ull << 30).stack(1, {0x1000, 0x2000});
  for (uint64_t i = 0; i < 24; ++i) {
    t.alloc(0x100000 + i * 0x1000, 4096 * (i + 1), 1);
    if (i % 3 != 0) t.free(0x100000 + i * 0x1000);
    if (i % 8 == 0) t.marker(gf::MarkerKind::kStep, "step");
    if (i % 5 == 0) t.torch(gf::TorchAction::kAlloc, 0x900000 + i, 512);
  }
  t.end();
  return t;
}

struct Read {
  gf::TraceIntegrity integrity;
  std::vector<uint64_t> events;  // time, address or size of each event, in order
  uint64_t records = 0;
  uint64_t helped = 0;  // blocks a Helping sink's thread took
};

class Keep : public gf::TraceSink {
 public:
  std::vector<uint64_t> events;
  void alloc(const gf::AllocRecord& r) override {
    events.insert(events.end(), {r.time_ns, r.address, r.size});
  }
  void free(const gf::FreeRecord& r) override {
    events.insert(events.end(), {r.time_ns, r.address});
  }
  void torch(const gf::TorchEventRecord& r) override {
    events.insert(events.end(), {r.time_ns, r.size});
  }
  void marker(const gf::MarkerRecord& r) override {
    events.insert(events.end(), {r.time_ns, r.name.size()});
  }
  void restart() override { events.clear(); }
};

// Keep, with a thread that takes blocks through ReadHelp while the read offers them, as the
// analyzer's replay thread does between batches (here all the time, to take as many as it may).
// Its first event waits until that thread took a block, so that every read offered help is one
// whose blocks two threads shared.
class Helping final : public Keep {
 public:
  std::atomic<uint64_t> helped = 0;
  int offers = 0, withdrawals = 0;

  bool wants_read_help() const override { return true; }
  void read_help(gf::ReadHelp* help) override {
    if (help) {
      ++offers;
      stop_ = false;
      waited_ = false;
      helper_ = std::thread([this, help] {
        while (!stop_) {
          if (help->help()) {
            std::lock_guard lock(mu_);
            ++helped;
            took_cv_.notify_all();
          } else {
            std::this_thread::yield();
          }
        }
      });
      return;
    }
    ++withdrawals;
    stop_ = true;
    helper_.join();
  }
  void alloc(const gf::AllocRecord& r) override {
    if (offers > withdrawals && !waited_) {  // once, and bounded: a failed test, not a hung one
      waited_ = true;
      std::unique_lock lock(mu_);
      took_cv_.wait_for(lock, std::chrono::seconds(20), [&] { return helped > 0; });
    }
    Keep::alloc(r);
  }

 private:
  std::thread helper_;
  std::atomic<bool> stop_ = false;
  bool waited_ = false;  // for the helper's first block, in this offer
  std::mutex mu_;
  std::condition_variable took_cv_;
};

Read read(const std::string& path) {
  gf::TraceReader reader(path);
  Keep sink;
  reader.read(sink);
  return Read{reader.integrity(), sink.events, reader.counts().records};
}

// No read threads (as on two cores): the reader shares the blocks with a Helping sink's thread.
Read read_helped(const TempDir& dir, const std::vector<uint8_t>& bytes, size_t limit) {
  gf::TraceReader reader(TraceBuilder::write_file(dir.file("t.trace"), bytes, limit));
  reader.set_read_threads(0);
  Helping sink;
  reader.read(sink);
  EXPECT_EQ(sink.offers, sink.withdrawals);
  return Read{reader.integrity(), sink.events, reader.counts().records, sink.helped};
}

Read read_bytes(const TempDir& dir, const std::vector<uint8_t>& bytes, size_t limit = SIZE_MAX) {
  return read(TraceBuilder::write_file(dir.file("t.trace"), bytes, limit));
}

uint64_t intact_records(const TraceBuilder& t) {
  TempDir dir;
  return read(t.write(dir.file("t.trace"))).records;
}

}  // namespace

TEST(TraceIntegrity, AWholeTraceIsComplete) {
  TempDir dir;
  // LZ4 as the shim writes blocks, zstd as writers of 3.0-3.2 did, raw as a recording thread does.
  for (auto codec : {gf::BlockCodec::kLz4, gf::BlockCodec::kZstd, gf::BlockCodec::kRaw}) {
    TraceBuilder t = sample(codec);
    Read r = read(t.write(dir.file("t.trace")));
    EXPECT_EQ(r.integrity.status, gf::IntegrityStatus::kComplete) << r.integrity.detail;
    EXPECT_TRUE(r.integrity.clean());
    EXPECT_TRUE(r.integrity.checked);
    EXPECT_EQ(r.integrity.blocks, t.block_offsets().size());
    EXPECT_EQ(r.integrity.detail, "");
    EXPECT_EQ(gf::integrity_name(r.integrity, {3, 0}), "complete");
  }
}

// A trace of a writer before 3.3 (zstd blocks, version 3.2) reads as the same events as the LZ4
// blocks of this one, complete.
TEST(TraceIntegrity, AnOlderWritersZstdBlocksReadAsTheSameEvents) {
  TempDir dir;
  TraceBuilder older = sample(gf::BlockCodec::kZstd);
  older.header_version(3, 2);
  const Read old_read = read(older.write(dir.file("old.trace")));
  const Read new_read = read(sample().write(dir.file("new.trace")));
  EXPECT_EQ(old_read.integrity.status, gf::IntegrityStatus::kComplete) << old_read.integrity.detail;
  EXPECT_EQ(old_read.events, new_read.events);
  EXPECT_EQ(old_read.records, new_read.records);
  EXPECT_FALSE(old_read.events.empty());
}

TEST(TraceIntegrity, NoEndIsIncomplete) {
  TempDir dir;
  TraceBuilder t;
  t.process(1, "app").alloc(0x1000, 64);
  Read r = read(t.write(dir.file("t.trace")));
  EXPECT_EQ(r.integrity.status, gf::IntegrityStatus::kIncomplete);
  EXPECT_FALSE(r.integrity.ended);
  EXPECT_NE(r.integrity.detail.find("no End record"), std::string::npos) << r.integrity.detail;
  EXPECT_EQ(r.events.size(), 3u);  // the allocation was read
}

TEST(TraceIntegrity, ACutInsideABlockIsIncompleteAndKeepsTheBlocksBefore) {
  TempDir dir;
  TraceBuilder t = sample();
  const size_t last = t.block_offsets().back();
  Read r = read_bytes(dir, t.bytes(), last + 50);
  EXPECT_EQ(r.integrity.status, gf::IntegrityStatus::kIncomplete) << r.integrity.detail;
  EXPECT_TRUE(r.integrity.truncated);
  EXPECT_EQ(r.integrity.first_problem_offset, last);
  EXPECT_EQ(r.integrity.blocks, t.block_offsets().size() - 1);
  EXPECT_NE(r.integrity.detail.find("ends inside a block at byte"), std::string::npos);
}

TEST(TraceIntegrity, APayloadFlipDamagesOneBlockAndCountsItsRecords) {
  TempDir dir;
  TraceBuilder t = sample();
  std::vector<uint8_t> bytes = t.bytes();
  const size_t block = t.block_offsets()[2];
  bytes[block + gf::kBlockHeaderSize + 3] ^= 0x10;
  Read r = read_bytes(dir, bytes);
  EXPECT_EQ(r.integrity.status, gf::IntegrityStatus::kDamaged);
  EXPECT_EQ(r.integrity.damaged_blocks, 1u);
  EXPECT_EQ(r.integrity.records_lost, 10u);
  EXPECT_TRUE(r.integrity.records_lost_exact);  // End's count says so too
  EXPECT_EQ(r.integrity.first_problem_offset, block);
  EXPECT_TRUE(r.integrity.ended);
  const size_t blocks = t.block_offsets().size() - 1,
               records = intact_records(t) - 1;  // before End
  EXPECT_EQ(r.integrity.detail,
            "damaged: 1 block failed its checksum or decompression (first at byte " +
                std::to_string(block) + "); the End record counts " + std::to_string(blocks) +
                " blocks and " + std::to_string(records) + " records before it, " +
                std::to_string(blocks - 1) + " and " + std::to_string(records - 10) +
                " read; 10 records lost");
}

// A payload whose checksum holds but whose LZ4 stream is not what the header says (a writer's bug,
// or a crafted file): the block is damaged, never read in part, whatever the stream claims.
TEST(TraceIntegrity, AnLz4PayloadThatDoesNotDecompressToItsSizeIsDamaged) {
  TempDir dir;
  TraceBuilder t = sample(gf::BlockCodec::kLz4);
  const std::vector<uint8_t> intact = t.bytes();
  const size_t block = t.block_offsets()[2];
  gf::BlockHeader h;
  ASSERT_TRUE(gf::decode_block_header(intact.data() + block, h));
  ASSERT_EQ(h.codec, gf::BlockCodec::kLz4);
  auto rehashed = [&](std::vector<uint8_t> bytes, uint32_t raw_size) {
    h.raw_size = raw_size;
    h.payload_hash = gf::payload_hash(bytes.data() + block + gf::kBlockHeaderSize, h.stored_size);
    gf::encode_block_header(bytes.data() + block, h);
    return bytes;
  };
  const uint32_t raw = h.raw_size;
  std::vector<uint8_t> garbled = intact;
  // A match offset pointing before the start of the output: the stream's first sequence.
  for (size_t i = 0; i < h.stored_size; ++i) garbled[block + gf::kBlockHeaderSize + i] = 0xFF;
  for (const auto& bytes :
       {rehashed(garbled, raw), rehashed(intact, raw + 1), rehashed(intact, raw - 1)}) {
    Read r = read_bytes(dir, bytes);
    EXPECT_EQ(r.integrity.status, gf::IntegrityStatus::kDamaged) << r.integrity.detail;
    EXPECT_EQ(r.integrity.damaged_blocks, 1u);
    EXPECT_EQ(r.integrity.records_lost, 10u);
    EXPECT_EQ(r.integrity.first_problem_offset, block);
  }
}

TEST(TraceIntegrity, AHeaderFlipIsResynchronisedAtTheNextBlock) {
  TempDir dir;
  TraceBuilder t = sample();
  std::vector<uint8_t> bytes = t.bytes();
  const size_t block = t.block_offsets()[3];
  bytes[block + 5] ^= 0x01;  // its sequence number: the header's checksum fails
  Read r = read_bytes(dir, bytes);
  EXPECT_EQ(r.integrity.status, gf::IntegrityStatus::kDamaged);
  EXPECT_EQ(r.integrity.missing_blocks, 1u);
  EXPECT_EQ(r.integrity.skipped_bytes, t.block_offsets()[4] - block);
  EXPECT_EQ(r.integrity.blocks, t.block_offsets().size() - 1);
  EXPECT_EQ(r.integrity.records_lost, 10u);
  EXPECT_TRUE(r.integrity.ended);  // the blocks after it were read
}

TEST(TraceIntegrity, JunkBetweenBlocksIsSkippedAndDeclared) {
  TempDir dir;
  TraceBuilder t = sample();
  std::vector<uint8_t> bytes = t.bytes();
  const size_t at = t.block_offsets()[1];
  bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at), 7, 0xAB);
  Read r = read_bytes(dir, bytes);
  EXPECT_EQ(r.integrity.status, gf::IntegrityStatus::kDamaged);
  EXPECT_EQ(r.integrity.skipped_bytes, 7u);
  EXPECT_EQ(r.integrity.records_lost, 0u);
  EXPECT_EQ(r.events, read(t.write(dir.file("whole.trace"))).events);  // nothing lost
}

TEST(TraceIntegrity, ASequenceGapCountsMissingBlocks) {
  TempDir dir;
  TraceBuilder t = sample();
  std::vector<uint8_t> bytes = t.bytes();
  const auto& at = t.block_offsets();
  bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(at[2]),
              bytes.begin() + static_cast<std::ptrdiff_t>(at[4]));
  Read r = read_bytes(dir, bytes);
  EXPECT_EQ(r.integrity.status, gf::IntegrityStatus::kDamaged);
  EXPECT_EQ(r.integrity.missing_blocks, 2u);
  EXPECT_EQ(r.integrity.skipped_bytes, 0u);
  EXPECT_EQ(r.integrity.records_lost, 20u);
  EXPECT_NE(r.integrity.detail.find("2 blocks missing"), std::string::npos) << r.integrity.detail;
}

TEST(TraceIntegrity, EndCountsBeyondWhatWasReadAreDamage) {
  TempDir dir;
  TraceBuilder t = sample();
  t.end_claims(t.block_offsets().size() + 2, intact_records(t) - 1 + 15);
  Read r = read(t.write(dir.file("t.trace")));
  EXPECT_EQ(r.integrity.status, gf::IntegrityStatus::kDamaged);
  EXPECT_EQ(r.integrity.records_lost, 15u);
  EXPECT_TRUE(r.integrity.records_lost_exact);
}

TEST(TraceIntegrity, AFailedWriteIsTheWorst) {
  TempDir dir;
  TraceBuilder flagged = sample();
  flagged.header_write_failed(28);
  std::vector<uint8_t> bytes = flagged.bytes();
  bytes.resize(bytes.size() - 5);
  Read r = read_bytes(dir, bytes);
  EXPECT_EQ(r.integrity.status, gf::IntegrityStatus::kWriteFailed);
  EXPECT_EQ(r.integrity.write_error, 28u);
  EXPECT_EQ(r.integrity.detail.rfind("write-failed: the shim could not write the trace (", 0), 0u)
      << r.integrity.detail;

  TraceBuilder ended;
  ended.process(1, "app").end(/*write_error=*/5);
  Read e = read(ended.write(dir.file("e.trace")));
  EXPECT_EQ(e.integrity.status, gf::IntegrityStatus::kWriteFailed);
  EXPECT_EQ(e.integrity.write_error, 5u);
}

// The shim sets the header's flag and errno in one write: an errno alone is a damaged header, and a
// number that is no errno is not given an errno's text.
TEST(TraceIntegrity, AnErrnoWithoutItsFlagIsDamage) {
  TempDir dir;
  std::vector<uint8_t> bytes = sample().bytes();
  bytes[gf::kHeaderWriteErrorOffset + 3] = 0xFF;  // 0xFF000000: no errno
  Read r = read_bytes(dir, bytes);
  EXPECT_EQ(r.integrity.status, gf::IntegrityStatus::kDamaged) << r.integrity.detail;
  EXPECT_NE(r.integrity.detail.find(
                "the file header holds an errno (4278190080) without its write-failed flag"),
            std::string::npos)
      << r.integrity.detail;

  TraceBuilder flagged = sample();
  flagged.header_write_failed(28);
  bytes = flagged.bytes();
  bytes[gf::kHeaderWriteErrorOffset + 3] = 0xFF;
  r = read_bytes(dir, bytes);
  EXPECT_EQ(r.integrity.status, gf::IntegrityStatus::kWriteFailed);
  EXPECT_NE(r.integrity.detail.find("(not an errno, errno 4278190108)"), std::string::npos)
      << r.integrity.detail;
}

TEST(TraceIntegrity, OlderFormatsAreUnchecked) {
  TempDir dir;
  for (gf::Version v : {gf::kVersion1_1, gf::kVersion2_0}) {
    TraceBuilder t(v);
    t.process(1, "app").alloc(0x1000, 64).end();
    Read r = read(t.write(dir.file("t.trace")));
    EXPECT_EQ(r.integrity.status, gf::IntegrityStatus::kUnchecked);
    EXPECT_TRUE(r.integrity.clean());
    EXPECT_FALSE(r.integrity.checked);
  }
}

TEST(TraceIntegrity, ARecordThatDoesNotDecodeDamagesOnlyItsBlock) {
  TempDir dir;
  TraceBuilder t;
  t.blocks(4);
  t.process(1, "app").alloc(0x1000, 64).alloc(0x2000, 64).alloc(0x3000, 64);
  t.module(std::string_view("/lib/a\0b.so", 11), 0x1000, 0x100).alloc(0x4000, 64);
  t.alloc(0x5000, 64).alloc(0x6000, 64).end();
  Read r = read(t.write(dir.file("t.trace")));
  EXPECT_EQ(r.integrity.status, gf::IntegrityStatus::kDamaged);
  EXPECT_EQ(r.integrity.damaged_blocks, 1u);
  // Blocks: [process, 3 allocations], [module, 3 allocations], [End]: the second block's
  // allocations are not delivered, not even those that decode.
  EXPECT_EQ(r.events.size(), 3u * 3);
}

namespace {

// Reads `bytes` (cut at `limit`) with GPUMEMSHIM_READ_THREADS set to `threads` (unset: nullptr).
Read read_with(TempDir& dir, const std::vector<uint8_t>& bytes, size_t limit, const char* threads) {
  if (threads)
    setenv("GPUMEMSHIM_READ_THREADS", threads, 1);
  else
    unsetenv("GPUMEMSHIM_READ_THREADS");
  Read r = read_bytes(dir, bytes, limit);
  unsetenv("GPUMEMSHIM_READ_THREADS");
  return r;
}

// The trace whole, cut short, with each of `damaged` blocks' payload flipped, and with two of
// them at once: each read the same by the reader alone, on one core, with 1, 3 and 16 read
// threads, and shared with the sink's thread (ReadHelp; helps: a stream that is worth sharing).
void expect_the_same_whatever_the_threads(const TraceBuilder& t, const std::vector<size_t>& damaged,
                                          bool helps = false) {
  TempDir dir;
  const std::vector<uint8_t> whole = t.bytes();
  const std::vector<size_t>& blocks = t.block_offsets();
  std::vector<std::pair<std::vector<uint8_t>, size_t>> variants = {{whole, SIZE_MAX},
                                                                   {whole, whole.size() - 7}};
  auto damage = [&](std::vector<uint8_t>& b, size_t block) {
    b[blocks[block] + gf::kBlockHeaderSize + 3] ^= 0x40;  // a payload byte: fails its checksum
  };
  for (size_t k : damaged) {
    std::vector<uint8_t> b = whole;
    damage(b, k);
    variants.emplace_back(b, SIZE_MAX);
  }
  std::vector<uint8_t> two = whole;
  damage(two, damaged[1]);
  damage(two, damaged[damaged.size() - 2]);
  variants.emplace_back(two, SIZE_MAX);

  cpu_set_t all, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  for (const auto& [bytes, limit] : variants) {
    const Read inline_read = read_with(dir, bytes, limit, "0");
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    const Read one_core = read_with(dir, bytes, limit, nullptr);
    ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
    const Read helped = read_helped(dir, bytes, limit);  // read_with left the variable unset
    for (const Read& r :
         {one_core, read_with(dir, bytes, limit, nullptr), read_with(dir, bytes, limit, "1"),
          read_with(dir, bytes, limit, "3"), read_with(dir, bytes, limit, "16"), helped}) {
      EXPECT_EQ(r.events, inline_read.events);
      EXPECT_EQ(r.records, inline_read.records);
      EXPECT_EQ(r.integrity.status, inline_read.integrity.status);
      EXPECT_EQ(r.integrity.detail, inline_read.integrity.detail);
    }
    // A stream worth sharing (more than 1 MiB of records) is shared.
    if (helps) {
      EXPECT_GT(helped.helped, 0u);
    }
  }
}

}  // namespace

// Blocks are checked and decompressed by the reader itself (one usable core, or
// GPUMEMSHIM_READ_THREADS=0), by worker threads that may finish out of order, or by the reader and
// the sink's thread in turns: the same events, counts and verdicts either way, for whole, cut and
// damaged traces.
TEST(TraceIntegrity, EveryNumberOfReadThreadsReadsTheSame) {
  TraceBuilder t = sample();
  std::vector<size_t> every(t.block_offsets().size());
  for (size_t k = 0; k < every.size(); ++k) every[k] = k;
  expect_the_same_whatever_the_threads(t, every);
}

// A stream of many huge pages, whose pages the reader releases as it goes and the next blocks
// reuse (block_stream.cpp): the same, with damaged blocks early, in the middle and last.
TEST(TraceIntegrity, ALongStreamReadsTheSameWhateverTheThreads) {
  TraceBuilder t;
  t.blocks(2048);
  t.process(42, "train.py").device(0, 80ull << 30).stack(1, {0x1000, 0x2000});
  for (uint64_t i = 0; i < 400'000; ++i) {
    const uint64_t address = 0x100000 + (i % 4096) * 0x1000;
    if (i % 2 == 0)
      t.alloc(address, 4096 + i % 977, 1);
    else
      t.free(address - 0x1000 * (i % 2));
    if (i % 50'000 == 0) t.marker(gf::MarkerKind::kStep, "step");
  }
  t.end();
  const size_t n = t.block_offsets().size();
  ASSERT_GT(n, 100u);
  expect_the_same_whatever_the_threads(t, {2, n / 3, n / 2, n - 2}, true);
}

// Every single-byte flip, every cut and every 3-byte overwrite of a trace reads either exactly as
// the intact trace or with a declared problem (integrity not clean, or the reader's error).
TEST(TraceIntegrity, NoDamageChangesWhatIsReadInSilence) {
  TempDir dir;
  TraceBuilder t = sample();
  const std::vector<uint8_t> whole = t.bytes();
  const Read intact = read_bytes(dir, whole);
  ASSERT_TRUE(intact.integrity.clean());
  uint64_t cases = 0, declared = 0;
  auto check = [&](const std::vector<uint8_t>& bytes, size_t limit, const std::string& what) {
    ++cases;
    try {
      Read r = read_bytes(dir, bytes, limit);
      if (!r.integrity.clean()) {
        ++declared;
        return;
      }
      EXPECT_EQ(r.events, intact.events) << what << ": different events, integrity clean";
      EXPECT_EQ(r.records, intact.records) << what;
    } catch (const gf::TraceReadError&) {
      ++declared;
    }
  };
  for (size_t i = 0; i < whole.size(); ++i) {
    std::vector<uint8_t> b = whole;
    b[i] ^= static_cast<uint8_t>(1u << (i % 8));
    check(b, SIZE_MAX, "flip at " + std::to_string(i));
  }
  for (size_t n = 0; n < whole.size(); ++n) check(whole, n, "cut at " + std::to_string(n));
  uint32_t seed = 12345;
  for (size_t i = 0; i + 3 <= whole.size(); i += 1) {
    for (int fill : {0xFF, 0x00, -1}) {
      std::vector<uint8_t> b = whole;
      for (size_t k = 0; k < 3; ++k) {
        seed = seed * 1664525u + 1013904223u;
        b[i + k] = fill >= 0 ? static_cast<uint8_t>(fill) : static_cast<uint8_t>(seed >> 24);
      }
      check(b, SIZE_MAX, "overwrite at " + std::to_string(i));
    }
  }
  std::printf("[ property ] %llu damaged traces of %zu bytes read, %llu declared a problem\n",
              static_cast<unsigned long long>(cases), whole.size(),
              static_cast<unsigned long long>(declared));
  EXPECT_GT(declared, cases / 2);
}

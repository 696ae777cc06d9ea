// Writes a realistic N-event trace with the project's encoder, for the analyzer throughput
// benchmark (bench/analyzer_throughput.sh): many threads allocating and freeing with a bounded live
// set each, a few thousand distinct stacks (a skewed mix: a few hot sites, a long tail), addresses
// reused after their free, step markers, a few leaks, and the file order the shim produces: each
// flush holds the records made by its cut, merged by time across threads with the shim's own code
// (shim/record/flush_order.h), and now and then a thread's last record before a cut lands in the
// next flush (a straggler: made just before the cut, buffered just after its ring was taken).
//
//   gen_trace OUT N [--threads T] [--stacks S] [--rank R] [--seed X] [--no-steps] [--twin-stacks]
//             [--torch] [--no-flush-marks] [--format-1] [--format-2] [--thread-batches]
//             [--block-bytes B] [--late]
//
// The trace is format 3.0, as the shim writes it: the records in blocks of about 2 MiB raw, each
// compressed with zstd level 1 (format/block_writer.h), the End record last with its counts.
// --block-bytes: blocks of about B raw bytes instead (the shim writes one block per flush, which
// on a busy program is a few hundred KiB).
// --format-2 writes the same records unframed after a 2.0 header (the hot records' fixed layout);
// --format-1 writes them as a 1.1 trace (varint hot records, a 1.1 header), for comparing them.
// Each flush ends with a Flush record, as the shim's flusher writes since format 1.1;
// --no-flush-marks leaves them out (a format 1.0 trace has none).
// --late: marks at the flusher's clock alone, not lowered to the records held back, which then
// come after a mark younger than they are: late events, as when a thread stalls past a flush
// interval between its clock read and its buffer.
// --torch: the allocations and frees are PyTorch caching-allocator tensor events (TorchEvent alloc
// / free_completed, as the bridge writes them) instead of cudaMalloc/cudaFree.
// --thread-batches: the file order without the ordered flush: each flush is the threads' batches
// one after the other, so time is out of order across threads within a flush (same events).
// --twin-stacks: the second half of the stacks repeat the first half's frames under other ids (as
// when one line is reached through different shim frames or Python callers): their call sites
// then group two raw stacks each, and the timeline needs the peaks of their sums.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "gpumemshim/format/block.h"
#include "gpumemshim/format/block_writer.h"
#include "gpumemshim/format/encoder.h"
#include "record/flush_order.h"

namespace gf = gpumemshim::format;

namespace {

struct Rng {  // xorshift64*: fast and reproducible
  uint64_t s;
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  uint64_t below(uint64_t n) { return next() % n; }
};

// The file: records buffered, then written as they are (formats 1 and 2) or framed into blocks
// of whole records (format 3).
class Out {
 public:
  // Format 3's raw block size by default: far below kMaxBlockBytes even with a 4 KiB record on top.
  static constexpr size_t kBlockBytes = 2u << 20;

  Out(const char* path, gf::Version version, size_t block_bytes)
      : f_(std::fopen(path, "wb")), version_(version), blocked_(gf::has_blocks(version)) {
    if (!f_) {
      std::perror(path);
      std::exit(2);
    }
    buf_.resize(blocked_ ? block_bytes : size_t{1} << 22);
  }
  ~Out() {
    flush();
    if (std::fclose(f_) != 0) {
      std::perror("close");
      std::exit(2);
    }
  }
  template <typename Rec>
  void put(const Rec& r) {
    if (buf_.size() - len_ < 4096) flush();
    size_t n = gf::encode_for(version_, buf_.data() + len_, buf_.size() - len_, r);
    if (n == 0) {
      std::fprintf(stderr, "gen_trace: a record did not encode\n");
      std::exit(2);
    }
    len_ += n;
  }
  // The file header: outside every block in format 3.
  void header() {
    uint8_t h[gf::kHeaderSizeV3];
    write(h, gf::encode_header(h, sizeof h, version_));
  }
  // Encoded records (a flush's worth); in format 3 split between blocks at record boundaries.
  void raw(const uint8_t* p, size_t n) {
    if (!blocked_) {
      if (buf_.size() - len_ < n) flush();
      if (n > buf_.size()) {  // a batch bigger than the buffer (one thread, a flush skipped by a step)
        write(p, n);
        return;
      }
      std::memcpy(buf_.data() + len_, p, n);
      len_ += n;
      return;
    }
    while (n > 0) {
      size_t take = whole_records(p, n, buf_.size() - len_);
      if (take == 0) {
        if (len_ == 0) {
          std::fprintf(stderr, "gen_trace: a record is larger than a block\n");
          std::exit(2);
        }
        flush();
        continue;
      }
      std::memcpy(buf_.data() + len_, p, take);
      len_ += take;
      p += take;
      n -= take;
      if (n > 0) flush();
    }
  }
  // The End record, last: in format 3 with the blocks before its block and the records before it.
  void end(uint64_t time_ns) {
    gf::EndRecord e;
    e.time_ns = time_ns;
    if (blocked_) {
      if (buf_.size() - len_ < 4096) flush();
      e.blocks = framer_.blocks();
      e.records = framer_.records() + gf::count_records(buf_.data(), len_);
    }
    put(e);
  }
  void flush() {
    if (blocked_) {
      if (len_ > 0) framer_.frame(buf_.data(), len_, [this](const uint8_t* p, size_t n) { write(p, n); });
    } else {
      write(buf_.data(), len_);
    }
    len_ = 0;
  }
  void write(const uint8_t* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) {
      std::perror("write");
      std::exit(2);
    }
  }

 private:
  // The bytes of the longest run of whole records at p that fits in `room`.
  static size_t whole_records(const uint8_t* p, size_t n, size_t room) {
    size_t at = 0;
    while (at < n) {
      size_t next = at + 1;  // type
      uint64_t len = 0;
      for (int shift = 0; next < n && shift < 64; shift += 7) {
        uint8_t b = p[next++];
        len |= uint64_t{b & 0x7fu} << shift;
        if (!(b & 0x80)) break;
      }
      if (len > n - next || next + len > room) break;
      at = next + len;
    }
    return at;
  }

  std::FILE* f_;
  gf::Version version_;
  bool blocked_;
  gf::BlockFramer framer_;
  std::vector<uint8_t> buf_;
  size_t len_ = 0;
};

struct Live {
  uint64_t address;
  uint32_t stack;
  uint64_t size;
};

struct Thread {
  uint64_t tid;
  std::vector<Live> live;
  std::vector<uint8_t> pending;  // encoded records not yet "flushed" to the file
  size_t last_record = 0;        // where the last record in `pending` begins
  uint64_t last_time = 0;        // and its time
  size_t held = 0;               // bytes of `pending` held over from the last flush (a straggler)
};

uint64_t arg_u64(int& i, int argc, char** argv) {
  if (i + 1 >= argc) {
    std::fprintf(stderr, "gen_trace: %s needs a value\n", argv[i]);
    std::exit(2);
  }
  return std::strtoull(argv[++i], nullptr, 10);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: gen_trace OUT N [--threads T] [--stacks S] [--rank R] [--seed X] "
                 "[--no-steps] [--twin-stacks] [--torch] [--no-flush-marks] [--late] [--format-1] "
                 "[--format-2] [--thread-batches] [--block-bytes B]\n");
    return 2;
  }
  const char* path = argv[1];
  const uint64_t events = std::strtoull(argv[2], nullptr, 10);
  uint64_t threads = 16, stacks = 3000, seed = 42;
  int64_t rank = -1;
  bool steps = true;  // --no-steps: no step markers (growth then counts windows of allocations)
  bool twins = false;
  bool torch = false;
  bool marks = true;
  bool late = false;  // --late
  bool thread_batches = false;
  gf::Version version = gf::kVersion;  // --format-1: a 1.1 trace; --format-2: a 2.0 trace
  uint64_t block_bytes = Out::kBlockBytes;
  for (int i = 3; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--threads") threads = arg_u64(i, argc, argv);
    else if (a == "--stacks") stacks = arg_u64(i, argc, argv);
    else if (a == "--seed") seed = arg_u64(i, argc, argv);
    else if (a == "--rank") rank = static_cast<int64_t>(arg_u64(i, argc, argv));
    else if (a == "--no-steps") steps = false;
    else if (a == "--twin-stacks") twins = true;
    else if (a == "--torch") torch = true;
    else if (a == "--no-flush-marks") marks = false;
    else if (a == "--late") late = true;
    else if (a == "--thread-batches") thread_batches = true;
    else if (a == "--format-1") version = gf::kVersion1_1;
    else if (a == "--format-2") version = gf::kVersion2_0;
    else if (a == "--block-bytes")
      block_bytes = arg_u64(i, argc, argv);
    else {
      std::fprintf(stderr, "gen_trace: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (threads == 0 || stacks == 0 || block_bytes < 8192 || block_bytes > Out::kBlockBytes) {
    std::fprintf(stderr,
                 "gen_trace: --threads and --stacks must be positive, --block-bytes in 8192..%zu\n",
                 Out::kBlockBytes);
    return 2;
  }
  if (version.major < 2) thread_batches = true;  // shims of format 1.x wrote thread batches
  Rng rng{seed * 0x9E3779B97F4A7C15ull + 1};
  Out out(path, version, block_bytes);
  out.header();
  out.put(gf::ProcessRecord{4242, 1, rank, 1'700'000'000'000'000'000ull, 1'000'000, "benchhost",
                            "python train.py --synthetic", "/usr/bin/python3"});
  out.put(gf::DeviceRecord{0, 141ull << 30, "NVIDIA H200"});
  out.put(gf::ModuleRecord{0x400000, 0x400000, 0x200000, std::string_view("\x12\x34", 2), "/usr/bin/python3"});

  // Stacks: 8..32 frames in one module, sharing outer frames like a real program's call tree.
  std::vector<uint64_t> stack_ids(stacks);
  {
    std::vector<std::vector<uint64_t>> all(stacks);
    for (uint64_t s = 0; s < stacks; ++s) {
      std::vector<uint64_t>& frames = all[s];
      if (twins && s >= stacks - stacks / 2) {
        frames = all[s - (stacks - stacks / 2)];
      } else {
        size_t depth = 8 + rng.below(25);
        for (size_t f = 0; f < depth; ++f)
          frames.push_back(0x400000 + (f < 4 ? rng.below(0x200000) : 0x1000 * (f * 7 + s % (f + 3))));
      }
      stack_ids[s] = rng.next() | 1;  // a 64-bit hash in a real trace: 9-10 byte varints in 1.x
      out.put(gf::StackRecord{stack_ids[s], static_cast<uint32_t>(frames.size()), frames.data()});
    }
  }

  std::vector<Thread> ts(threads);
  for (uint64_t t = 0; t < threads; ++t) ts[t].tid = 100000 + t;
  // Addresses: 2 MiB-aligned slots handed out and reused after their free (like cudaMalloc).
  std::vector<uint64_t> free_slots;
  uint64_t next_slot = 0;
  auto slot_address = [](uint64_t slot) { return 0x7f0000000000ull + (slot << 21); };

  uint8_t rec[256];
  auto emit = [&](Thread& t, const auto& r) {
    size_t n = gf::encode_for(version, rec, sizeof rec, r);
    t.last_record = t.pending.size();
    t.last_time = r.time_ns;
    t.pending.insert(t.pending.end(), rec, rec + n);
  };
  // The shim flushes every thread's ring each 50 ms: here every kFlushEvery events.
  constexpr uint64_t kFlushEvery = 1 << 16;
  uint64_t time = 0, written = 0, leaks = 0, step = 0;
  // Its own stream: the events are the same with --thread-batches.
  Rng straggle_rng{seed * 0x9E3779B97F4A7C15ull + 2};
  std::vector<gpumemshim::shim::ThreadBatch> batches(threads);
  std::vector<gpumemshim::shim::MergeCursor> cursors(threads);
  std::vector<uint8_t> merged;
  auto flush_all = [&](bool last) {
    uint64_t mark = time;
    if (thread_batches) {
      for (Thread& t : ts) {
        out.raw(t.pending.data(), t.pending.size());
        t.pending.clear();
      }
    } else {
      size_t total = 0;
      for (size_t i = 0; i < ts.size(); ++i) {
        Thread& t = ts[i];
        // One batch in eight holds its last record back, if it was made since the last flush: a
        // record in flight, whose time the shim's mark does not pass (in_flight.h).
        const bool straggles = !last && t.pending.size() > t.held && straggle_rng.below(8) == 0;
        batches[i] = {t.pending.data(), straggles ? t.last_record : t.pending.size()};
        if (straggles && !late) mark = std::min(mark, t.last_time);
        total += batches[i].size;
      }
      merged.resize(total);
      out.raw(merged.data(), gpumemshim::shim::merge_by_time(batches.data(), ts.size(),
                                                             cursors.data(), merged.data()));
      for (size_t i = 0; i < ts.size(); ++i) {
        Thread& t = ts[i];
        auto taken = t.pending.begin() + static_cast<std::ptrdiff_t>(batches[i].size);
        t.pending.erase(t.pending.begin(), taken);
        t.held = t.pending.size();
        t.last_record = 0;
      }
    }
    // The flusher's clock, lowered to the records in flight, as a 3.2 shim writes it: every later
    // record was made at or after it.
    if (marks) out.put(gf::FlushRecord{mark});
  };

  constexpr size_t kMaxLivePerThread = 48;
  while (written < events) {
    time += 50 + rng.below(200);
    if (steps && written % 20000 == 19999) {  // a training step, on the main thread
      emit(ts[0], gf::MarkerRecord{time, ts[0].tid, gf::MarkerKind::kStep, "step", 0});
      ++written;
      ++step;
      continue;
    }
    Thread& t = ts[rng.below(threads)];
    bool do_free = !t.live.empty() && (t.live.size() >= kMaxLivePerThread || rng.below(2) == 0);
    if (do_free) {
      size_t k = rng.below(t.live.size());
      Live l = t.live[k];
      t.live[k] = t.live.back();
      t.live.pop_back();
      if (torch)
        emit(t, gf::TorchEventRecord{time, t.tid, 0, 0, gf::TorchAction::kFreeCompleted, l.address, l.size, 0});
      else
        emit(t, gf::FreeRecord{time, t.tid, -1, 0, gf::Api::kCudaFree, gf::MemoryKind::kDevice, l.address,
                               0, 0});
      free_slots.push_back((l.address - 0x7f0000000000ull) >> 21);
    } else {
      // Skewed site choice: half the allocations from 1% of the sites.
      uint64_t hot = std::max<uint64_t>(1, stacks / 100);
      uint32_t s = static_cast<uint32_t>(rng.below(2) ? rng.below(hot) : rng.below(stacks));
      uint64_t size = uint64_t{512} << rng.below(16);  // 512 B .. 16 MiB
      uint64_t slot;
      if (!free_slots.empty()) {
        slot = free_slots.back();
        free_slots.pop_back();
      } else {
        slot = next_slot++;
      }
      uint64_t address = slot_address(slot);
      if (torch)
        emit(t, gf::TorchEventRecord{time, t.tid, 0, 0x5000 + (t.tid & 3), gf::TorchAction::kAlloc, address,
                                     size, stack_ids[s]});
      else
        emit(t, gf::AllocRecord{time, t.tid, 0, 0x5000 + (t.tid & 3), gf::Api::kCudaMalloc,
                                gf::MemoryKind::kDevice, address, size, stack_ids[s]});
      if (rng.below(1000) == 0) ++leaks;  // never freed: a leak
      else t.live.push_back(Live{address, s, size});
    }
    if (++written % kFlushEvery == 0) flush_all(false);
  }
  flush_all(true);
  out.end(time + 1000);
  std::fprintf(stderr, "gen_trace: %llu events (%llu steps, %llu leaked allocations), %llu threads, %llu stacks -> %s\n",
               static_cast<unsigned long long>(written), static_cast<unsigned long long>(step),
               static_cast<unsigned long long>(leaks), static_cast<unsigned long long>(threads),
               static_cast<unsigned long long>(stacks), path);
  return 0;
}

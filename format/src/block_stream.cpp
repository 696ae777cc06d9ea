#include "block_stream.h"

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "decoder.h"
#include "gpumemshim/format/block_decompress.h"
#include "gpumemshim/format/fixed_layout.h"
#include "gpumemshim/format/trace_reader.h"
#include "read_errors.h"

namespace gpumemshim::format {

namespace {

// Who checks and decompresses blocks besides the reader.
struct BlockHands {
  unsigned workers = 0;  // threads of the stream's own, ahead of the reader
  bool helper = false;   // the sink's thread, when it would otherwise wait
};

// GPUMEMSHIM_READ_THREADS if set (that many workers, at most kMaxReadThreads; 0: the reader
// alone), else nobody for a stream of at most small_stream bytes, else the caller's choice of
// workers, else read_threads_for(the usable cores); without workers, the sink if it helps.
BlockHands block_hands(uint64_t stream_bytes, uint64_t small_stream, std::optional<unsigned> chosen,
                       bool sink_helps) {
  constexpr unsigned kMaxReadThreads = 64;
  if (const char* env = std::getenv("GPUMEMSHIM_READ_THREADS"); env && *env) {
    char* end = nullptr;
    const unsigned long n = std::strtoul(env, &end, 10);
    if (*end == '\0' && env[0] != '-')
      return {.workers = static_cast<unsigned>(std::min<unsigned long>(n, kMaxReadThreads))};
  }
  if (stream_bytes <= small_stream) return {};
  const unsigned workers =
      chosen ? std::min(*chosen, kMaxReadThreads) : read_threads_for(usable_cores());
  return {.workers = workers, .helper = workers == 0 && sink_helps};
}

// The next offset at or after `from` where a block header verifies; SIZE_MAX if none.
size_t next_header(std::span<const uint8_t> file, size_t from) {
  static constexpr uint8_t kMagicBytes[4] = {'G', 'M', 'S', 'B'};
  BlockHeader h;
  while (from + kBlockHeaderSize <= file.size()) {
    const void* hit = memmem(file.data() + from, file.size() - from, kMagicBytes, 4);
    if (!hit) break;
    const size_t at = static_cast<size_t>(static_cast<const uint8_t*>(hit) - file.data());
    if (at + kBlockHeaderSize <= file.size() && decode_block_header(file.data() + at, h)) return at;
    from = at + 1;
  }
  return SIZE_MAX;
}

// The file's last bytes, too few for a header: the start of a block cut short (its magic so far),
// or junk.
bool cut_header(std::span<const uint8_t> tail) {
  static constexpr uint8_t kMagicBytes[4] = {'G', 'M', 'S', 'B'};
  return tail.size() < kBlockHeaderSize &&
         std::memcmp(tail.data(), kMagicBytes, std::min<size_t>(tail.size(), 4)) == 0;
}

void note_junk(BlockScan& s, uint64_t at, uint64_t bytes) {
  s.junk_bytes += bytes;
  s.first_junk_offset = std::min(s.first_junk_offset, at);
}

// A header that verifies at `at`: its block is read, or counted as out of sequence.
void take_block(BlockScan& s, uint64_t at, const BlockHeader& h, uint64_t& next_seq) {
  if (h.seq < next_seq) {
    ++s.out_of_sequence;
    s.out_of_sequence_offset = std::min(s.out_of_sequence_offset, at);
    return;
  }
  if (h.seq > next_seq) {
    s.missing_blocks += h.seq - next_seq;
    s.first_gap_offset = std::min(s.first_gap_offset, at);
  }
  next_seq = uint64_t{h.seq} + 1;
  s.blocks.push_back(BlockRef{at, h});
  s.raw_bytes += h.raw_size;
}

// A hot record as next_hot() frames it (type, one-byte length, payload): whether its fixed
// layout decodes, as record_decodes() would say.
[[gnu::always_inline]] inline bool hot_record_decodes(const uint8_t* rec) {
  const uint8_t* payload = rec + 2;
  const size_t size = rec[1];
  switch (static_cast<RecordType>(rec[0])) {
    case RecordType::kAlloc: {
      AllocRecord r;
      return decode_fixed(payload, size, r);
    }
    case RecordType::kFree: {
      FreeRecord r;
      return decode_fixed(payload, size, r);
    }
    case RecordType::kTorchEvent: {
      TorchEventRecord r;
      return decode_fixed(payload, size, r);
    }
    default:
      return false;
  }
}

}  // namespace

unsigned usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    return std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(CPU_COUNT(&set));
}

unsigned read_threads_for(unsigned cores) {
  constexpr unsigned kMostReadThreads = 4;
  return cores < 2 ? 0 : std::clamp(cores - 2, 1u, kMostReadThreads);
}

BlockScan scan_blocks(std::span<const uint8_t> file) {
  PassedPages scanned(file, 32ull << 20);
  BlockScan s;
  s.flags = detail::get32(file.data() + kHeaderFlagsOffset);
  s.write_error = detail::get32(file.data() + kHeaderWriteErrorOffset);
  uint64_t next_seq = 0;
  size_t at = kHeaderSizeV3;
  BlockHeader h;
  while (at < file.size()) {
    const size_t left = file.size() - at;
    if (left >= kBlockHeaderSize && decode_block_header(file.data() + at, h)) {
      if (h.stored_size > left - kBlockHeaderSize) {  // the file ends inside this block
        s.truncated = true;
        s.truncated_at = at;
        s.truncated_bytes = left;
        break;
      }
      take_block(s, at, h, next_seq);
      at += kBlockHeaderSize + h.stored_size;
      scanned.passed(at);
      continue;
    }
    const size_t next = next_header(file, at + 1);
    if (next == SIZE_MAX) {
      if (cut_header(file.subspan(at))) {
        s.truncated = true;
        s.truncated_at = at;
        s.truncated_bytes = left;
      } else {
        note_junk(s, at, left);
      }
      break;
    }
    note_junk(s, at, next - at);
    at = next;
  }
  return s;
}

BlockStream::BlockStream(const BlockScan& scan, std::span<const uint8_t> file, Version version,
                         std::optional<unsigned> read_threads, bool sink_helps)
    : scan_(scan), file_(file), version_(version), file_read_(file, 8ull << 20) {
  // Room for every block; only the pages between the reader and the producer are ever resident.
  // A page more so that a decoder reading ahead of the last record stays inside the mapping.
  region_size_ = scan.raw_bytes + 4096;
  // Huge pages where the kernel lends them: the decompressed stream is written once and read once,
  // and 4 KiB pages would cost a fault and a zeroing per page written, and a release per page read
  // (a fifth of the reading time). The mapping is aligned to kHugePage so that each fault and
  // each release covers whole huge pages.
  // Two huge pages more: one for the alignment, and one so that the huge page holding the
  // region's last byte lies wholly inside the mapping (back_pages moves whole pages).
  mapping_size_ = region_size_ + 2 * kHugePage;
  void* p = mmap(nullptr, mapping_size_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  mapping_ = static_cast<uint8_t*>(p);
  const auto aligned = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) / kHugePage * kHugePage;
  region_ = reinterpret_cast<uint8_t*>(aligned);
  if (region_size_ >= kHugePage) madvise(region_, region_size_, MADV_HUGEPAGE);
  // With one core, threads would only take turns with the reader, and their blocks would have
  // left the cache by the time the reader got to them: the reader takes each block itself, when it
  // needs it, and reads it while it is still in the cache. With more, blocks are checked and
  // decompressed by workers on the cores the caller gives them (the analyzer's plan_threads), each
  // into its place in the region. With two, the caller's second thread (the analyzer's replay)
  // shares the reader's: it takes the blocks ahead while it waits for events, so that whichever
  // of the two is idle decompresses, and not one fixed thread that then limits the read.
  // A small stream neither: starting, waking and joining threads costs more than overlapping so
  // little decompression with the read saves.
  const BlockHands hands = block_hands(scan.raw_bytes, kInline, read_threads, sink_helps);
  if ((hands.workers == 0 && !hands.helper) || scan.blocks.empty()) return;
  helped_ = hands.helper;
  slots_.resize(scan.blocks.size());
  uint64_t at = 0;
  for (size_t i = 0; i < scan.blocks.size(); ++i) {
    slots_[i].at = at;
    at += scan.blocks[i].header.raw_size;
  }
  for (unsigned i = 0; i < hands.workers; ++i) {
    ZSTD_DCtx* dctx = ZSTD_createDCtx();
    if (!dctx) break;  // the workers started so far do the work
    worker_dctx_.push_back(dctx);
    workers_.emplace_back([this, dctx] { work(dctx); });
  }
}

BlockStream::~BlockStream() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  room_cv_.notify_all();
  for (std::thread& w : workers_) w.join();
  for (ZSTD_DCtx* d : worker_dctx_) ZSTD_freeDCtx(d);
  ZSTD_freeDCtx(helper_dctx_);
  ZSTD_freeDCtx(dctx_);
  munmap(mapping_, mapping_size_);
}

// A thread's own decompression context, made at its first zstd block (raw and LZ4 blocks need
// none): false when it could not be made.
bool BlockStream::own_dctx(ZSTD_DCtx*& own, const BlockRef& b) {
  if (!own && b.header.codec == BlockCodec::kZstd) own = ZSTD_createDCtx();
  return own || b.header.codec != BlockCodec::kZstd;
}

ZSTD_DCtx* BlockStream::reader_dctx(const BlockRef& b) {
  if (!own_dctx(dctx_, b)) throw std::bad_alloc();
  return dctx_;
}

uint64_t BlockStream::wait_beyond(uint64_t at) {
  const size_t n = scan_.blocks.size();
  if (slots_.empty()) {  // the reader takes the blocks itself
    while (produced_ <= at && committed_ < n) {
      Checked c;
      const BlockRef& b = scan_.blocks[committed_];
      back_pages(produced_ + b.header.raw_size);
      check_block(b, reader_dctx(b), region_ + produced_, c);
      commit(c, produced_);
    }
    if (committed_ == n) results_.raw_bytes = produced_;
    return produced_;
  }
  // Rather than wait for the workers, the reader checks the next unclaimed block itself: when
  // they fall behind (one worker decompressing zstd blocks, slower than the reader at the
  // analysis) the cores share the decompression instead of one of them idling. At most one block
  // beyond those the workers or the helper hold: one that stalls (a loaded machine) must not have
  // the reader fill kAhead behind it, every page of it resident until the stalled block is done.
  const size_t others = workers_.size() + (helped_ ? 1 : 0);
  std::unique_lock lock(mu_);
  consumed_ = at;
  room_cv_.notify_all();
  while (produced_ <= at && committed_ < n) {
    if (error_) std::rethrow_exception(error_);
    if (claimed_ - committed_ > others || !may_claim()) {
      ready_cv_.wait(lock);
      continue;
    }
    check_next(lock, reader_dctx(scan_.blocks[claimed_]));
  }
  if (error_) std::rethrow_exception(error_);
  return produced_;
}

// Under mu_ (held by `lock`): claims the next block, checks it into its slot without the lock,
// and commits every block that is then done, in order. What the check throws (no memory) is kept
// for the reader, who would otherwise wait for the block for ever; the block stays uncommitted.
void BlockStream::check_next(std::unique_lock<std::mutex>& lock, ZSTD_DCtx* dctx) {
  const size_t i = claimed_++;
  try {
    back_pages(slots_[i].at + scan_.blocks[i].header.raw_size);
    lock.unlock();
    check_block(scan_.blocks[i], dctx, region_ + slots_[i].at, slots_[i].checked);
    lock.lock();
  } catch (...) {
    if (!lock.owns_lock()) lock.lock();
    if (!error_) error_ = std::current_exception();
    stop_ = true;
    ready_cv_.notify_all();
    room_cv_.notify_all();
    return;
  }
  slots_[i].done = true;
  commit_done();
}

bool BlockStream::help() {
  if (!helped_) return false;
  std::unique_lock lock(mu_);
  if (stop_ || !may_claim()) return false;
  // The helper's context is touched by its thread only; none to be had: the reader does the work.
  if (!own_dctx(helper_dctx_, scan_.blocks[claimed_])) return false;
  check_next(lock, helper_dctx_);
  return true;
}

// Under mu_: whether the next block may be claimed now, once it fits in kAhead (in the slots'
// places: a damaged block before it moves it down later, so this errs on the side of less), or
// when the reader has caught up with every block (the next one may be larger than kAhead). The
// read threads catching up with their own claims is not enough: they decompress faster than the
// reader analyses, and would run ahead of it without bound.
bool BlockStream::may_claim() const {
  const size_t n = scan_.blocks.size();
  if (claimed_ == n) return false;
  if (claimed_ == committed_ && consumed_ >= produced_) return true;
  const uint64_t lost = slots_[committed_].at - produced_;  // to damaged blocks so far
  return slots_[claimed_].at + scan_.blocks[claimed_].header.raw_size <= consumed_ + lost + kAhead;
}

// Under mu_: commits every block that is done, in order, and wakes who waits for them.
void BlockStream::commit_done() {
  const size_t n = scan_.blocks.size(), before = committed_;
  while (committed_ < n && slots_[committed_].done)
    commit(slots_[committed_].checked, slots_[committed_].at);
  if (committed_ == n) results_.raw_bytes = produced_;
  if (committed_ != before) {
    ready_cv_.notify_one();
    room_cv_.notify_all();
  }
}

void BlockStream::consumed(uint64_t at) {
  if (slots_.empty()) return;
  {
    std::lock_guard lock(mu_);
    consumed_ = at;
  }
  room_cv_.notify_all();
}

void BlockStream::release(uint64_t upto) {
  std::unique_lock lock(mu_, std::defer_lock);
  if (!slots_.empty()) lock.lock();
  for (upto = upto / kHugePage * kHugePage; released_ < upto; released_ += kHugePage) {
    if (move_pages_ && kept_pages_.size() < kKeptPages)
      kept_pages_.push_back(released_);
    else
      drop_page(released_);
  }
}

// Under mu_ with slots, before anything is written to the region below `end`: the pages there
// not backed yet get the memory of pages the reader released, moved in place (mremap moves the
// page tables). The decompressed stream is written once and read once: every fresh page would
// otherwise cost a fault and the kernel's zeroing of it, a fifth of a compressed trace's reading
// time. The region never has a hole that another mapping of the process could take: the moved
// page's place stays mapped (MREMAP_DONTUNMAP), and the move itself replaces the destination's
// mapping at once. A kernel before 5.7 refuses the flag: pages are then not moved.
void BlockStream::back_pages(uint64_t end) {
  end = std::min<uint64_t>(end, region_size_);
  for (; backed_ < end; backed_ += kHugePage) {
    if (kept_pages_.empty() || !move_pages_) continue;  // the kernel faults this one in
    const uint64_t from = kept_pages_.back();
    kept_pages_.pop_back();
    uint8_t* const to = region_ + backed_;
    if (mremap(region_ + from, kHugePage, kHugePage,
               MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, to) != MAP_FAILED) {
      drop_page(from);  // empty now: merged into the released part's mapping
      continue;
    }
    move_pages_ = false;  // and the pages kept for moves are given back
    drop_page(from);
    for (uint64_t kept : kept_pages_) drop_page(kept);
    kept_pages_.clear();
    remap_if_unmapped(to);
  }
}

// After a move that failed: the destination is still mapped when the kernel refused the call
// before it unmapped anything (an unknown flag), else it is mapped afresh in its place. Another
// thread's mapping may have taken that hole meanwhile: nothing can be written there then, and the
// read stops as out of memory rather than write over it.
void BlockStream::remap_if_unmapped(uint8_t* at) {
  static const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident(kHugePage / page);
  if (mincore(at, kHugePage, resident.data()) == 0) return;  // mapped: faulted in as any other
  void* p = mmap(at, kHugePage, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (p != at) {
    // A kernel before 4.17 (and valgrind) takes the flag for a hint and maps elsewhere.
    if (p != MAP_FAILED) munmap(p, kHugePage);
    throw std::bad_alloc();
  }
  madvise(at, kHugePage, MADV_HUGEPAGE);
}

// A released page not kept: its memory given back, its place mapped read-only (a stray read
// finds zeros, as after MADV_DONTNEED), replaced in one call so that it is never a hole, and like
// the released pages around it so that they make one mapping.
void BlockStream::drop_page(uint64_t at) {
  mmap(region_ + at, kHugePage, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
       -1, 0);
}

const BlockResults& BlockStream::finish() {
  if (workers_.empty()) {
    wait_beyond(UINT64_MAX);  // with a helper, waits for the block it holds, if any
  } else {
    for (std::thread& w : workers_) w.join();
    workers_.clear();
    std::lock_guard lock(mu_);
    if (error_) std::rethrow_exception(error_);
  }
  return results_;
}

// A worker: checks the next block whenever it may claim one.
void BlockStream::work(ZSTD_DCtx* dctx) {
  const size_t n = scan_.blocks.size();
  std::unique_lock lock(mu_);
  for (;;) {
    room_cv_.wait(lock, [&] { return stop_ || claimed_ == n || may_claim(); });
    if (stop_ || claimed_ == n) return;
    check_next(lock, dctx);
  }
}

// The next block in order, checked into the region at `written_at`: a good one goes right after
// the last good one (a damaged block leaves no gap), and its records count.
void BlockStream::commit(const Checked& c, uint64_t written_at) {
  const BlockRef& b = scan_.blocks[committed_++];
  if (c.good) {
    if (written_at != produced_)
      std::memmove(region_ + produced_, region_ + written_at, b.header.raw_size);
    if (c.end_index != UINT32_MAX && !results_.ended) {
      results_.ended = true;
      results_.end = c.end;
      results_.blocks_before_end = results_.good_blocks;
      results_.records_before_end = results_.good_records + c.end_index;
    }
    ++results_.good_blocks;
    results_.good_records += b.header.record_count;
    produced_ += b.header.raw_size;
  } else {
    ++results_.damaged_blocks;
    results_.damaged_records += b.header.record_count;
    results_.damaged_bytes += kBlockHeaderSize + b.header.stored_size;
    results_.first_damaged_offset = std::min(results_.first_damaged_offset, b.offset);
  }
  file_read_.passed(b.offset);
}

// Whether the block at b is good: its payload's checksum, its decompression to exactly raw_size
// bytes (into dst), and every record framed and decoded as the reader will, as many as the header
// counts. end_index: the End record's place in the block, if it has one.
void BlockStream::check_block(const BlockRef& b, ZSTD_DCtx* dctx, uint8_t* dst, Checked& out) {
  out.good = block_is_good(b, dctx, dst, out.end_index, out.end);
}

bool BlockStream::block_is_good(const BlockRef& b, ZSTD_DCtx* dctx, uint8_t* dst,
                                uint32_t& end_index, EndRecord& end) {
  const BlockHeader& h = b.header;
  const uint8_t* payload = file_.data() + b.offset + kBlockHeaderSize;
  if (payload_hash(payload, h.stored_size) != h.payload_hash) return false;
  if (!decompress_payload(h.codec, payload, h.stored_size, dst, h.raw_size, dctx)) return false;
  RecordReader reader({});
  reader.start_stream({dst, h.raw_size}, version_);
  std::vector<uint64_t> frames;
  std::vector<PyFrameRef> py_frames;
  uint32_t count = 0;
  RawRecord raw;
  for (;;) {
    // The hot records, the bulk of a block, checked inline as the reader's own hot path frames
    // them; one that fails is left to the careful path below, which rejects it.
    reader.next_hot(
        h.raw_size, [&count](const uint8_t* rec) __attribute__((always_inline)) {
          const bool ok = hot_record_decodes(rec);
          count += ok;
          return ok;
        });
    const ReadStatus st = reader.next(raw);
    if (st == ReadStatus::kEnd) break;
    if (st != ReadStatus::kRecord || !record_decodes(raw, frames, py_frames)) return false;
    if (raw.type == RecordType::kEnd) {
      end_index = count;
      decode(raw, end);
    }
    ++count;
  }
  return count == h.record_count;
}

}  // namespace gpumemshim::format

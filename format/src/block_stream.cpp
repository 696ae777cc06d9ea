#include "block_stream.h"

#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include <cstring>
#include <memory>
#include <new>

#include "decoder.h"
#include "read_errors.h"

namespace gpumemshim::format {

namespace {

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

}  // namespace

BlockScan scan_blocks(std::span<const uint8_t> file) {
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

BlockStream::BlockStream(const BlockScan& scan, std::span<const uint8_t> file, Version version)
    : scan_(scan), file_(file), version_(version) {
  // Room for every block; only the pages between the reader and the producer are ever resident.
  // A page more so that a decoder reading ahead of the last record stays inside the mapping.
  region_size_ = scan.raw_bytes + 4096;
  void* p = mmap(nullptr, region_size_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  region_ = static_cast<uint8_t*>(p);
  if (scan.raw_bytes > kInline) {
    producer_ = std::thread([this] { produce(); });
    return;
  }
  // A small stream is produced here, before the reader starts: it fits the room the producer may
  // take ahead (it never waits for the reader), and starting, waking and joining a thread costs
  // more than overlapping so little decompression with the read saves.
  try {
    produce();
  } catch (...) {
    munmap(region_, region_size_);
    throw;
  }
}

BlockStream::~BlockStream() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  room_cv_.notify_all();
  if (producer_.joinable()) producer_.join();
  munmap(region_, region_size_);
}

uint64_t BlockStream::wait_beyond(uint64_t at) {
  std::unique_lock lock(mu_);
  consumed_ = at;
  room_cv_.notify_one();
  ready_cv_.wait(lock, [&] { return ready_.load(std::memory_order_acquire) > at || done_; });
  return ready_.load(std::memory_order_acquire);
}

void BlockStream::consumed(uint64_t at) {
  {
    std::lock_guard lock(mu_);
    consumed_ = at;
  }
  room_cv_.notify_one();
}

const BlockResults& BlockStream::finish() {
  if (producer_.joinable()) producer_.join();
  return results_;
}

bool BlockStream::wait_for_room(uint64_t produced, uint64_t size) {
  std::unique_lock lock(mu_);
  room_cv_.wait(lock, [&] {
    return stop_ || consumed_ >= produced || produced + size - consumed_ <= kAhead;
  });
  return !stop_;
}

void BlockStream::publish(uint64_t ready, bool done) {
  {
    std::lock_guard lock(mu_);
    ready_.store(ready, std::memory_order_release);
    done_ = done;
  }
  ready_cv_.notify_one();
}

// Checks and decompresses the blocks in order, each into the region right after the last good
// one: a damaged block leaves no gap.
void BlockStream::produce() {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  constexpr uint64_t kReleaseEvery = 8ull << 20;
  DCtx dctx(nullptr, ZSTD_freeDCtx);  // made at the first compressed block: raw ones need none
  uint64_t produced = 0, released = 0;
  for (const BlockRef& b : scan_.blocks) {
    if (!wait_for_room(produced, b.header.raw_size)) break;
    uint32_t end_index = UINT32_MAX;
    EndRecord end;
    if (check_block(b, dctx, region_ + produced, end_index, end)) {
      if (end_index != UINT32_MAX && !results_.ended) {
        results_.ended = true;
        results_.end = end;
        results_.blocks_before_end = results_.good_blocks;
        results_.records_before_end = results_.good_records + end_index;
      }
      ++results_.good_blocks;
      results_.good_records += b.header.record_count;
      produced += b.header.raw_size;
      publish(produced, false);
    } else {
      ++results_.damaged_blocks;
      results_.damaged_records += b.header.record_count;
      results_.damaged_bytes += kBlockHeaderSize + b.header.stored_size;
      results_.first_damaged_offset = std::min(results_.first_damaged_offset, b.offset);
    }
    // The compressed pages read are dropped from the process (they stay in the page cache).
    if (b.offset - released >= kReleaseEvery) {
      released = b.offset / page * page;
      madvise(const_cast<uint8_t*>(file_.data()), released, MADV_DONTNEED);
    }
  }
  results_.raw_bytes = produced;
  publish(produced, true);
}

// Whether the block at b is good: its payload's checksum, its decompression to exactly raw_size
// bytes (into dst), and every record framed and decoded as the reader will, as many as the header
// counts. end_index: the End record's place in the block, if it has one.
bool BlockStream::check_block(const BlockRef& b, DCtx& dctx, uint8_t* dst, uint32_t& end_index,
                              EndRecord& end) {
  const BlockHeader& h = b.header;
  const uint8_t* payload = file_.data() + b.offset + kBlockHeaderSize;
  if (payload_hash(payload, h.stored_size) != h.payload_hash) return false;
  if (h.codec == BlockCodec::kZstd) {
    if (!dctx) {
      dctx.reset(ZSTD_createDCtx());
      if (!dctx) throw std::bad_alloc();
    }
    const size_t n = ZSTD_decompressDCtx(dctx.get(), dst, h.raw_size, payload, h.stored_size);
    if (ZSTD_isError(n) || n != h.raw_size) return false;
  } else {
    std::memcpy(dst, payload, h.stored_size);
  }
  RecordReader reader({});
  reader.start_stream({dst, h.raw_size}, version_);
  std::vector<uint64_t> frames;
  std::vector<PyFrameRef> py_frames;
  uint32_t count = 0;
  RawRecord raw;
  for (ReadStatus st; (st = reader.next(raw)) != ReadStatus::kEnd; ++count) {
    if (st != ReadStatus::kRecord || !record_decodes(raw, frames, py_frames)) return false;
    if (raw.type == RecordType::kEnd) {
      end_index = count;
      decode(raw, end);
    }
  }
  return count == h.record_count;
}

}  // namespace gpumemshim::format

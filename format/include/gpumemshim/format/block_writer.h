// Frames raw payloads of whole records into format 3 blocks (block.h) and hands each framed block
// to a sink: the one framing shared by the tools that write format 3 outside the shim (the trace
// generator of the benchmarks, the tests' trace builder), so that they frame blocks the same way.
// The shim keeps its own writer (shim/record/block_writer.*): it runs in the traced process and
// cannot allocate or throw where this one does. Header-only; its users link liblz4 and libzstd.
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#ifndef ZSTD_STATIC_LINKING_ONLY
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_c_literalCompressionMode
#endif
#include <zstd.h>

#include "gpumemshim/format/block.h"
#include "gpumemshim/format/block_codec.h"

namespace gpumemshim::format {

// The zstd level and settings the writers of 3.0-3.2 compressed their blocks with (level -3, the
// literals stored raw): BlockFramer writes such blocks for the tests of reading older traces.
inline constexpr int kBlockZstdLevel = -3;
inline bool set_block_compression(ZSTD_CCtx* cctx, int level) {
  return !ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level)) &&
         !ZSTD_isError(
             ZSTD_CCtx_setParameter(cctx, ZSTD_c_literalCompressionMode, ZSTD_ps_disable));
}

class BlockFramer {
 public:
  // codec: how blocks are stored (LZ4, as the shim writes them; zstd, as writers of 3.0-3.2 did; or
  // raw).
  explicit BlockFramer(BlockCodec codec = BlockCodec::kLz4) : codec_(codec) {}
  ~BlockFramer() { ZSTD_freeCCtx(cctx_); }
  BlockFramer(const BlockFramer&) = delete;
  BlockFramer& operator=(const BlockFramer&) = delete;

  // Frames `raw` (whole records, at most kMaxBlockBytes) as the next block and calls
  // sink(const uint8_t*, size_t) with its header, then with its stored payload. Returns the
  // record count the header carries.
  template <typename Sink>
  uint32_t frame(const uint8_t* raw, size_t n, Sink&& sink) {
    const uint8_t* stored = raw;
    size_t stored_size = n;
    if (codec_ == BlockCodec::kLz4) {
      lz4_state_.resize((block_compress_state_size() + 7) / 8);
      scratch_.resize(block_compress_bound(n));
      stored_size = compress_block(lz4_state_.data(), raw, n, scratch_.data(), scratch_.size());
      if (stored_size == 0 && n != 0) throw std::bad_alloc();  // a bound-sized output always fits
      stored = scratch_.data();
    } else if (codec_ == BlockCodec::kZstd) {
      // One context for every block: a fresh one per block would cost its tables each time.
      if (!cctx_ && !(cctx_ = ZSTD_createCCtx())) throw std::bad_alloc();
      if (!configured_ && !(configured_ = set_block_compression(cctx_, kBlockZstdLevel)))
        throw std::bad_alloc();
      scratch_.resize(ZSTD_compressBound(n));
      stored_size = ZSTD_compress2(cctx_, scratch_.data(), scratch_.size(), raw, n);
      if (ZSTD_isError(stored_size))
        throw std::bad_alloc();  // only out of memory, with a bound-sized output
      stored = scratch_.data();
    }
    BlockHeader h;
    h.seq = blocks_;
    h.stored_size = static_cast<uint32_t>(stored_size);
    h.raw_size = static_cast<uint32_t>(n);
    h.record_count = count_records(raw, n);
    h.codec = codec_;
    h.payload_hash = payload_hash(stored, stored_size);
    uint8_t header[kBlockHeaderSize];
    encode_block_header(header, h);
    sink(static_cast<const uint8_t*>(header), kBlockHeaderSize);
    sink(stored, stored_size);
    ++blocks_;
    records_ += h.record_count;
    return h.record_count;
  }

  // What an End record counts: the blocks and records framed so far.
  uint32_t blocks() const { return blocks_; }
  uint64_t records() const { return records_; }

 private:
  BlockCodec codec_;
  std::vector<uint64_t> lz4_state_;  // LZ4's state, pointer-aligned
  ZSTD_CCtx* cctx_ = nullptr;
  bool configured_ = false;
  std::vector<uint8_t> scratch_;
  uint32_t blocks_ = 0;
  uint64_t records_ = 0;
};

}  // namespace gpumemshim::format

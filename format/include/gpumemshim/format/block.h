// Format 3's frame: a 32-byte file header, then blocks of whole records, each with a sequence
// number, its sizes, a record count and checksums (docs/trace-format.md "Blocks"). Header-only:
// the shim frames blocks with it, the reader checks them with it. The checksums are XXH3 from
// libxxhash, inlined (no runtime dependency for the shim).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "gpumemshim/format/records.h"

namespace gpumemshim::format {

inline constexpr uint16_t kBlockFormatMajor = 3;
inline constexpr size_t kHeaderSizeV3 = 32;
static_assert(kVersionMajor == kBlockFormatMajor, "the version written is the block format");
// Header flags (u32 at offset 12). Set in place by the shim, never rewritten otherwise.
inline constexpr uint32_t kHeaderWriteFailed = 1;
// Offsets inside the 32-byte header.
inline constexpr size_t kHeaderFlagsOffset = 12;
inline constexpr size_t kHeaderWriteErrorOffset = 16;  // u32 errno of the first failed write

inline constexpr uint32_t kBlockMagic = 0x42534d47;  // "GMSB" in file byte order
inline constexpr size_t kBlockHeaderSize = 40;
inline constexpr uint32_t kMaxBlockBytes = 64u << 20;  // stored and raw sizes

// How a block's payload is stored. Writers of 3.3 on compress with LZ4 (block_codec.h says why);
// zstd blocks are those of 3.0-3.2 writers, still read.
enum class BlockCodec : uint8_t { kRaw = 0, kZstd = 1, kLz4 = 2 };

struct BlockHeader {
  uint32_t seq = 0;
  uint32_t stored_size = 0;  // payload bytes in the file
  uint32_t raw_size = 0;     // payload bytes once decompressed (== stored_size when raw)
  uint32_t record_count = 0;
  BlockCodec codec = BlockCodec::kRaw;
  uint64_t payload_hash = 0;  // XXH3_64bits of the stored payload
};

namespace detail {
inline void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
}  // namespace detail

// The 32-byte header of a format 3 file: magic, major, minor, flags 0, write_error 0, reserved 0.
inline size_t encode_header_v3(uint8_t* out, size_t capacity, uint16_t minor = kVersionMinor) {
  if (capacity < kHeaderSizeV3) return 0;
  std::memset(out, 0, kHeaderSizeV3);
  std::memcpy(out, kMagic, 8);
  out[8] = static_cast<uint8_t>(kBlockFormatMajor & 0xff);
  out[9] = static_cast<uint8_t>(kBlockFormatMajor >> 8);
  out[10] = static_cast<uint8_t>(minor & 0xff);
  out[11] = static_cast<uint8_t>(minor >> 8);
  return kHeaderSizeV3;
}

inline uint64_t payload_hash(const uint8_t* payload, size_t n) { return XXH3_64bits(payload, n); }

// Writes the 40-byte block header (h.payload_hash must already be set).
inline void encode_block_header(uint8_t* out, const BlockHeader& h) {
  detail::put32(out, kBlockMagic);
  detail::put32(out + 4, h.seq);
  detail::put32(out + 8, h.stored_size);
  detail::put32(out + 12, h.raw_size);
  detail::put32(out + 16, h.record_count);
  out[20] = static_cast<uint8_t>(h.codec);
  out[21] = out[22] = out[23] = 0;
  detail::put64(out + 24, h.payload_hash);
  detail::put64(out + 32, XXH3_64bits(out, 32));
}

// Parses a block header at p (kBlockHeaderSize bytes readable). False when the magic or the
// header's own checksum is wrong, or a size or the codec is out of range: not a block header.
inline bool decode_block_header(const uint8_t* p, BlockHeader& h) {
  if (detail::get32(p) != kBlockMagic) return false;
  if (detail::get64(p + 32) != XXH3_64bits(p, 32)) return false;
  h.seq = detail::get32(p + 4);
  h.stored_size = detail::get32(p + 8);
  h.raw_size = detail::get32(p + 12);
  h.record_count = detail::get32(p + 16);
  if (p[20] > static_cast<uint8_t>(BlockCodec::kLz4)) return false;
  h.codec = static_cast<BlockCodec>(p[20]);
  h.payload_hash = detail::get64(p + 24);
  if (h.stored_size > kMaxBlockBytes || h.raw_size > kMaxBlockBytes) return false;
  if (h.codec == BlockCodec::kRaw && h.raw_size != h.stored_size) return false;
  return true;
}

// Counts the whole records (type, varint length, payload) in a raw block payload; the count the
// writer puts in the header. Stops at the first frame that does not fit.
inline uint32_t count_records(const uint8_t* p, size_t n) {
  uint32_t count = 0;
  size_t at = 0;
  while (at < n) {
    ++at;  // type
    uint64_t len = 0;
    int shift = 0;
    while (at < n && shift < 64) {
      uint8_t b = p[at++];
      len |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) break;
      shift += 7;
    }
    if (len > n - at) break;
    at += len;
    ++count;
  }
  return count;
}

}  // namespace gpumemshim::format

// The fuzz target's controls (trace_fuzzer.cpp): one byte of the trace header that the format
// reserves and the reader ignores, the last of the header (byte 15 in formats 1 and 2, byte 31 in
// format 3). Mutations of the trace leave it alone; mutations of it change only what the target
// does with the trace. Shared with make_seeds.cpp, which sets it on the seeds.
//
//   bit 0     format 3: recompute the blocks' checksums before the read (repair_checksums), so
//             that mutations of a block reach its decompression, its records and the analysis
//             instead of failing the checksum (inputs without it exercise the damage checks)
//   bits 1-2  the report writer that renders the analysis besides the text report (Writer)
//   bits 3-5  the CI policy the SARIF and JUnit writers apply (FailPolicy): leaks over the limit,
//             growth fails at any rate, incomplete traces allowed
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gpumemshim/format/block.h"
#include "gpumemshim/format/records.h"

namespace gpumemshim::fuzz {

inline constexpr uint8_t kRepairChecksums = 0x01;
enum class Writer : uint8_t { kJson = 0, kSarif = 1, kHtml = 2, kJunit = 3 };
inline constexpr int kWriterShift = 1;
inline constexpr uint8_t kLeaksOverLimit = 0x08;
inline constexpr uint8_t kGrowthFails = 0x10;
inline constexpr uint8_t kAllowIncomplete = 0x20;
inline constexpr uint8_t with_writer(uint8_t controls, Writer w) {
  return static_cast<uint8_t>((controls & ~(3 << kWriterShift)) |
                              (static_cast<uint8_t>(w) << kWriterShift));
}

// The offset of the control byte; 0 when the input has no complete trace header.
inline size_t control_offset(const uint8_t* data, size_t size) {
  namespace gf = gpumemshim::format;
  if (size < gf::kHeaderSize || std::memcmp(data, gf::kMagic, sizeof gf::kMagic) != 0) return 0;
  const bool v3 = data[8] == gf::kBlockFormatMajor && data[9] == 0;
  const size_t header = v3 ? gf::kHeaderSizeV3 : gf::kHeaderSize;
  return size >= header ? header - 1 : 0;
}

inline uint8_t controls(const uint8_t* data, size_t size) {
  const size_t at = control_offset(data, size);
  return at ? data[at] : 0;
}

inline Writer writer(uint8_t controls) {
  return static_cast<Writer>((controls >> kWriterShift) & 3);
}

// Walks the blocks as the reader's scan does (a block header, its payload, or the next block magic
// after bytes that are none) and recomputes each header's payload hash and own hash. A header
// whose payload runs past the end gets its own hash only (a cut block).
inline void repair_checksums(uint8_t* p, size_t n) {
  namespace gf = gpumemshim::format;
  static constexpr uint8_t kMagicBytes[4] = {'G', 'M', 'S', 'B'};
  size_t at = gf::kHeaderSizeV3;
  while (at + gf::kBlockHeaderSize <= n) {
    if (gf::detail::get32(p + at) != gf::kBlockMagic) {
      const void* hit = memmem(p + at + 1, n - at - 1, kMagicBytes, sizeof kMagicBytes);
      if (!hit) return;
      at = static_cast<size_t>(static_cast<const uint8_t*>(hit) - p);
      continue;
    }
    const uint32_t stored = gf::detail::get32(p + at + 8);
    const bool whole = stored <= n - at - gf::kBlockHeaderSize;
    if (whole)
      gf::detail::put64(p + at + 24, gf::payload_hash(p + at + gf::kBlockHeaderSize, stored));
    gf::detail::put64(p + at + 32, XXH3_64bits(p + at, 32));
    if (!whole) return;
    at += gf::kBlockHeaderSize + stored;
  }
}

}  // namespace gpumemshim::fuzz

// Checks a format 3 trace's blocks with the format's own definitions (format/block.h), for
// test_trace_writing.py: every block header's checksum, every payload's XXH3, compressed payloads
// (LZ4, or zstd from writers before 3.3) decompressing to raw_size, record_count against the
// records in the payload, and sequence numbers. Prints one line: "blocks N lz4 L zstd Z records R
// seq_contiguous 0|1 tail B" (tail: bytes after the last whole block); exits 1 at the first block
// that fails a check, saying which.
#include <zstd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

#include "gpumemshim/format/block.h"
#include "gpumemshim/format/block_decompress.h"

namespace fmtrec = gpumemshim::format;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: check_blocks TRACE\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < fmtrec::kHeaderSizeV3 || data[8] != fmtrec::kBlockFormatMajor) {
    std::printf("not a format 3 trace\n");
    return 1;
  }
  size_t at = fmtrec::kHeaderSizeV3, blocks = 0, lz4 = 0, zstd = 0, records = 0;
  bool contiguous = true;
  std::vector<uint8_t> raw;
  const std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  while (at + fmtrec::kBlockHeaderSize <= data.size()) {
    fmtrec::BlockHeader h;
    if (!fmtrec::decode_block_header(data.data() + at, h)) {
      std::printf("bad block header at offset %zu\n", at);
      return 1;
    }
    const uint8_t* payload = data.data() + at + fmtrec::kBlockHeaderSize;
    if (at + fmtrec::kBlockHeaderSize + h.stored_size > data.size()) break;  // cut short
    if (fmtrec::payload_hash(payload, h.stored_size) != h.payload_hash) {
      std::printf("block %u at offset %zu fails its payload hash\n", h.seq, at);
      return 1;
    }
    lz4 += h.codec == fmtrec::BlockCodec::kLz4;
    zstd += h.codec == fmtrec::BlockCodec::kZstd;
    raw.resize(h.raw_size);
    if (!fmtrec::decompress_payload(h.codec, payload, h.stored_size, raw.data(), raw.size(),
                                    dctx.get())) {
      std::printf("block %u does not decompress to %u bytes\n", h.seq, h.raw_size);
      return 1;
    }
    if (fmtrec::count_records(raw.data(), raw.size()) != h.record_count) {
      std::printf("block %u: record_count %u, payload holds %u\n", h.seq, h.record_count,
                  fmtrec::count_records(raw.data(), raw.size()));
      return 1;
    }
    contiguous = contiguous && h.seq == blocks;
    ++blocks;
    records += h.record_count;
    at += fmtrec::kBlockHeaderSize + h.stored_size;
  }
  std::printf("blocks %zu lz4 %zu zstd %zu records %zu seq_contiguous %d tail %zu\n", blocks, lz4,
              zstd, records, contiguous ? 1 : 0, data.size() - at);
  return 0;
}

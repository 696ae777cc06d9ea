// The block codecs compared on a trace's own records: each codec compresses the trace's blocks as
// they are (the flusher's cuts) and decompresses them, as the shim and the reader do. Prints, per
// codec, the bytes per event, the compression time per event (the flusher's CPU) and the best
// decompression time over the rounds (the reader's CPU): what chose the format's codec
// (docs/benchmarks.md, "Trace size and decoding").
//
//   build/bench/block_codecs TRACE [ROUNDS]     (TRACE: format 3, as bench/shim_trace.sh writes it)
#include <lz4.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "gpumemshim/format/block.h"
#include "gpumemshim/format/block_codec.h"
#include "gpumemshim/format/block_decompress.h"
#include "gpumemshim/format/block_writer.h"

namespace gf = gpumemshim::format;

namespace {

using Bytes = std::vector<uint8_t>;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The trace's blocks, decompressed; their records counted in `records`.
std::vector<Bytes> raw_blocks(const Bytes& file, uint64_t& records) {
  std::vector<Bytes> out;
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  size_t at = gf::kHeaderSizeV3;
  gf::BlockHeader h;
  while (at + gf::kBlockHeaderSize <= file.size() && gf::decode_block_header(file.data() + at, h) &&
         at + gf::kBlockHeaderSize + h.stored_size <= file.size()) {
    const uint8_t* payload = file.data() + at + gf::kBlockHeaderSize;
    Bytes raw(h.raw_size);
    if (!gf::decompress_payload(h.codec, payload, h.stored_size, raw.data(), raw.size(), dctx))
      break;
    records += h.record_count;
    out.push_back(std::move(raw));
    at += gf::kBlockHeaderSize + h.stored_size;
  }
  ZSTD_freeDCtx(dctx);
  return out;
}

struct Codec {
  const char* name;
  std::function<size_t(const Bytes& raw, Bytes& out)> compress;
  gf::BlockCodec stored_as;  // what decompresses it, as the reader does
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: block_codecs TRACE [ROUNDS]\n");
    return 2;
  }
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 7;
  std::ifstream in(argv[1], std::ios::binary);
  const Bytes file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t records = 0;
  const std::vector<Bytes> blocks = raw_blocks(file, records);
  if (blocks.empty() || records == 0) {
    std::fprintf(stderr, "block_codecs: %s: no format 3 blocks\n", argv[1]);
    return 2;
  }
  size_t raw_bytes = 0, largest = 0;
  for (const Bytes& b : blocks) {
    raw_bytes += b.size();
    largest = std::max(largest, b.size());
  }

  std::vector<uint64_t> lz4_state((gf::block_compress_state_size() + 7) / 8);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  auto zstd_at = [&](int level, bool raw_literals) {
    return [&, level, raw_literals](const Bytes& raw, Bytes& out) {
      ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
      if (raw_literals)
        gf::set_block_compression(cctx, level);
      else
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
      out.resize(ZSTD_compressBound(raw.size()));
      const size_t n = ZSTD_compress2(cctx, out.data(), out.size(), raw.data(), raw.size());
      return ZSTD_isError(n) ? 0 : n;
    };
  };
  const std::vector<Codec> codecs = {
      {"LZ4 high compression, level 2 (3.3 on)",
       [&](const Bytes& raw, Bytes& out) {
         out.resize(gf::block_compress_bound(raw.size()));
         return gf::compress_block(lz4_state.data(), raw.data(), raw.size(), out.data(),
                                   out.size());
       },
       gf::BlockCodec::kLz4},
      {"LZ4 fast",
       [](const Bytes& raw, Bytes& out) {
         out.resize(gf::block_compress_bound(raw.size()));
         const int n = LZ4_compress_default(
             reinterpret_cast<const char*>(raw.data()), reinterpret_cast<char*>(out.data()),
             static_cast<int>(raw.size()), static_cast<int>(out.size()));
         return static_cast<size_t>(std::max(n, 0));
       },
       gf::BlockCodec::kLz4},
      {"zstd -3, raw literals (3.0-3.2)", zstd_at(gf::kBlockZstdLevel, true),
       gf::BlockCodec::kZstd},
      {"zstd 1", zstd_at(1, false), gf::BlockCodec::kZstd},
      {"none (a copy)",
       [](const Bytes& raw, Bytes& out) {
         out.assign(raw.begin(), raw.end());
         return raw.size();
       },
       gf::BlockCodec::kRaw},
  };

  std::printf("%s: %zu blocks, %llu records, %.1f MB of records\n\n", argv[1], blocks.size(),
              static_cast<unsigned long long>(records), static_cast<double>(raw_bytes) / 1e6);
  std::printf(
      "| codec | bytes per record | compression ns per record | decompression s (best of %d) |\n",
      rounds);
  std::printf("|---|---:|---:|---:|\n");
  Bytes out(largest);
  for (const Codec& c : codecs) {
    // Timed into one buffer, as the flusher compresses (fresh pages would add their faults).
    std::vector<Bytes> stored(blocks.size());
    Bytes scratch;
    scratch.reserve(gf::block_compress_bound(largest) + ZSTD_compressBound(largest));
    size_t total = 0;
    double compress_s = 0;
    for (size_t i = 0; i < blocks.size(); ++i) {
      const Clock::time_point start = Clock::now();
      const size_t n = c.compress(blocks[i], scratch);
      compress_s += seconds_since(start);
      if (n == 0) {
        std::fprintf(stderr, "block_codecs: %s failed on block %zu\n", c.name, i);
        return 1;
      }
      stored[i].assign(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(n));
      total += n;
    }
    double best = 1e300;
    for (int r = 0; r < rounds; ++r) {
      const Clock::time_point t = Clock::now();
      for (size_t i = 0; i < blocks.size(); ++i)
        if (!gf::decompress_payload(c.stored_as, stored[i].data(), stored[i].size(), out.data(),
                                    blocks[i].size(), dctx))
          abort();
      best = std::min(best, seconds_since(t));
    }
    std::printf("| %s | %.2f | %.0f | %.3f |\n", c.name, static_cast<double>(total) / records,
                compress_s / static_cast<double>(records) * 1e9, best);
  }
  ZSTD_freeCCtx(cctx);
  ZSTD_freeDCtx(dctx);
  return 0;
}

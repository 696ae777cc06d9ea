// How every writer compresses a block (the shim's flusher, the trace generator, the tests' trace
// builder): LZ4's high-compression mode at one level, into a caller's state and buffer, so that the
// shim can call it with no malloc on any thread's exit path. Header-only; its users link liblz4.
#pragma once
#include <lz4hc.h>

#include <cstddef>
#include <cstdint>

namespace gpumemshim::format {

// Why LZ4: a compressed trace costs its reader the decompression of every block, on one core in
// the analysis's own time. LZ4 blocks of the shim's records decode at about memcpy's speed, several
// times faster than zstd's at its fastest level, for about a third more bytes, well within the
// 8 bytes per event the format aims at. Why the high-compression mode: LZ4's fast mode misses most
// of the matches between records of 44 and 48 bytes; the hash-chain mode at its lowest level finds
// them, for a few times zstd's compression time, spent on the flusher (figures: docs/benchmarks.md,
// "Trace size and decoding").
inline constexpr int kBlockLz4Level = 2;

// The bytes of state compress_block() needs, and the most bytes a block of n raw bytes compresses
// to.
inline size_t block_compress_state_size() {
  return static_cast<size_t>(LZ4_sizeofStateHC());
}
inline size_t block_compress_bound(size_t n) {
  return static_cast<size_t>(LZ4_compressBound(static_cast<int>(n)));
}

// Compresses raw[0, n) into out[0, capacity) with `state` (block_compress_state_size() bytes,
// pointer-aligned); returns the compressed size, 0 when it could not (out too small).
inline size_t compress_block(void* state, const uint8_t* raw, size_t n, uint8_t* out,
                             size_t capacity) {
  const int r = LZ4_compress_HC_extStateHC(
      state, reinterpret_cast<const char*>(raw), reinterpret_cast<char*>(out), static_cast<int>(n),
      static_cast<int>(capacity < size_t{INT32_MAX} ? capacity : size_t{INT32_MAX}),
      kBlockLz4Level);
  return r > 0 ? static_cast<size_t>(r) : 0;
}

}  // namespace gpumemshim::format

// A block's stored payload back to its records, for every codec a reader meets: the one
// decompression the trace reader, the tests' block checker and the codec benchmark share.
// Header-only; its users link liblz4 and libzstd.
#pragma once
#include <lz4.h>
#include <zstd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gpumemshim/format/block.h"

namespace gpumemshim::format {

// Whether payload[0, stored_size), stored with `codec`, gives exactly raw_size bytes at dst (which
// has room for raw_size). dctx: zstd's context, needed for zstd blocks only. LZ4's safe decoder and
// zstd never read or write outside the two buffers, whatever the payload holds.
inline bool decompress_payload(BlockCodec codec, const uint8_t* payload, size_t stored_size,
                               uint8_t* dst, size_t raw_size, ZSTD_DCtx* dctx) {
  switch (codec) {
    case BlockCodec::kLz4: {
      const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(payload),
                                        reinterpret_cast<char*>(dst), static_cast<int>(stored_size),
                                        static_cast<int>(raw_size));
      return n >= 0 && static_cast<size_t>(n) == raw_size;
    }
    case BlockCodec::kZstd: {
      const size_t n = ZSTD_decompressDCtx(dctx, dst, raw_size, payload, stored_size);
      return !ZSTD_isError(n) && n == raw_size;
    }
    case BlockCodec::kRaw:
      if (stored_size != raw_size) return false;
      std::memcpy(dst, payload, stored_size);
      return true;
  }
  return false;
}

}  // namespace gpumemshim::format

#include "ring.h"

#include "block_writer.h"

namespace gpumemshim::shim {

void Ring::drain_locked(BlockWriter& out) {
  uint64_t t = tail_.load(std::memory_order_relaxed);
  uint64_t h = head_.load(std::memory_order_acquire);
  if (h == t) return;
  size_t at = static_cast<size_t>(t % kCapacity);
  size_t n = static_cast<size_t>(h - t);
  size_t first = n < kCapacity - at ? n : kCapacity - at;
  // What cannot be written (no file, a failed write) is dropped, never retried, so the owner
  // never blocks on it; the writer counts it.
  out.write_raw(data_ + at, first, data_, n - first);
  tail_.store(h, std::memory_order_release);
}

}  // namespace gpumemshim::shim

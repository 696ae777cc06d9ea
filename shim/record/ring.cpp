#include "ring.h"

#include <unistd.h>

#include <cerrno>

namespace gpumemshim::shim {

bool Ring::drain_locked(int fd) {
  uint64_t t = tail_.load(std::memory_order_relaxed);
  uint64_t h = head_.load(std::memory_order_acquire);
  if (h == t) return true;
  if (fd < 0) {  // nowhere to write: drop, so the owner never blocks
    tail_.store(h, std::memory_order_release);
    return false;
  }
  size_t at = static_cast<size_t>(t % kCapacity);
  size_t n = static_cast<size_t>(h - t);
  size_t first = n < kCapacity - at ? n : kCapacity - at;
  iovec iov[2] = {{data_ + at, first}, {data_, n - first}};
  int count = n > first ? 2 : 1;
  bool ok = true;
  for (;;) {
    ssize_t w = ::writev(fd, iov, count);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) ok = false;
    // A short write only happens when the disk is full; the rest is dropped, not retried, so a
    // later record cannot land in the middle of this one.
    break;
  }
  tail_.store(h, std::memory_order_release);
  return ok;
}

}  // namespace gpumemshim::shim

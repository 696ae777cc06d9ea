// A per-thread byte ring of whole encoded records. The owning thread appends without any lock;
// whoever drains it (the owner when full, the flusher thread every 50 ms, exit, fork) takes the
// ring's own flag, which only the owner and the flusher ever touch. Each drain is one writev(2) on
// an O_APPEND file, so records of different threads never interleave inside a record.
#pragma once
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gpumemshim::shim {

class Ring {
 public:
  static constexpr size_t kCapacity = 256 * 1024;

  // Owner only. False when the record does not fit even after a drain was attempted by the caller.
  bool has_room(size_t n) const {
    return kCapacity - (head_.load(std::memory_order_relaxed) -
                        tail_.load(std::memory_order_acquire)) >= n;
  }

  // Owner only; the caller checked has_room.
  void append(const uint8_t* bytes, size_t n) {
    uint64_t h = head_.load(std::memory_order_relaxed);
    size_t at = static_cast<size_t>(h % kCapacity);
    size_t first = n < kCapacity - at ? n : kCapacity - at;
    std::memcpy(data_ + at, bytes, first);
    std::memcpy(data_, bytes + first, n - first);
    head_.store(h + n, std::memory_order_release);
  }

  // Any thread. Writes everything appended so far to fd; returns false if the write failed.
  bool drain(int fd) {
    while (busy_.test_and_set(std::memory_order_acquire)) {
    }
    bool ok = drain_locked(fd);
    busy_.clear(std::memory_order_release);
    return ok;
  }

  // After fork, in the child: the parent's pending bytes are the parent's to write, and a drain
  // that held the flag in another thread will never finish.
  void reset_after_fork() {
    busy_.clear();
    tail_.store(head_.load());
  }

  bool empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }

 private:
  bool drain_locked(int fd);

  std::atomic<uint64_t> head_{0};
  std::atomic<uint64_t> tail_{0};
  std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
  uint8_t data_[kCapacity];
};

}  // namespace gpumemshim::shim

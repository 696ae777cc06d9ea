// A per-thread byte ring of whole encoded records. The owning thread appends without any lock;
// whoever drains it (the owner when full, the flusher thread every 50 ms, exit, fork) takes the
// ring's own lock, which only the owner, the flusher and exit ever touch. Each drain is one block of
// whole records (block_writer.h), so records of different threads never interleave inside a record.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "spin_lock.h"

namespace gpumemshim::shim {

class BlockWriter;

class Ring {
 public:
  static constexpr size_t kCapacity = 256 * 1024;

  // Owner only. False when the record does not fit even after a drain was attempted by the caller.
  bool has_room(size_t n) const {
    return kCapacity - (head_.load(std::memory_order_relaxed) -
                        tail_.load(std::memory_order_acquire)) >= n;
  }

  // Owner only; the caller checked has_room. Returns the bytes pending after it (for waking the
  // flusher early: a ring that fills before the next flush is drained by its owner, unordered).
  size_t append(const uint8_t* bytes, size_t n) {
    uint64_t h = head_.load(std::memory_order_relaxed);
    size_t at = static_cast<size_t>(h % kCapacity);
    size_t first = n < kCapacity - at ? n : kCapacity - at;
    std::memcpy(data_ + at, bytes, first);
    std::memcpy(data_, bytes + first, n - first);
    return publish(n);
  }
  // Owner only: where the next n bytes go when they fit in one piece, to encode a record in place
  // (then publish() the bytes it took); null when they do not. The bytes past head are no one
  // else's: drains read only up to head, and has_room keeps the unconsumed ones out of reach.
  uint8_t* reserve(size_t n) {
    size_t at = static_cast<size_t>(head_.load(std::memory_order_relaxed) % kCapacity);
    return kCapacity - at >= n && has_room(n) ? data_ + at : nullptr;
  }
  // Owner only: the n bytes written at reserve()'s pointer are the ring's. Returns what append
  // does.
  size_t publish(size_t n) {
    uint64_t h = head_.load(std::memory_order_relaxed) + n;
    head_.store(h, std::memory_order_release);
    return static_cast<size_t>(h - tail_.load(std::memory_order_relaxed));
  }

  // Any thread. Writes everything appended so far as one raw block. bounded: give up (and write
  // nothing) when the ring's lock is not free within a while (see SpinLock).
  void drain(BlockWriter& out, bool bounded = false) {
    if (!busy_.lock(bounded)) return;
    drain_locked(out);
    busy_.unlock();
  }

  // The flusher's ordered flush (flush_order.h): it locks the rings it takes records from, copies
  // their pending bytes, writes what it took and only then consumes it and unlocks, so the owner
  // cannot write newer records of its own (a full ring's drain) ahead of older ones.
  bool lock(bool bounded = false) { return busy_.lock(bounded); }
  void unlock() { busy_.unlock(); }
  // Locked. Copies the pending bytes, in order, to dst (room for kCapacity); returns how many.
  size_t copy_pending(uint8_t* dst) const {
    uint64_t t = tail_.load(std::memory_order_relaxed);
    size_t n = static_cast<size_t>(head_.load(std::memory_order_acquire) - t);
    size_t at = static_cast<size_t>(t % kCapacity);
    size_t first = n < kCapacity - at ? n : kCapacity - at;
    std::memcpy(dst, data_ + at, first);
    std::memcpy(dst + first, data_, n - first);
    return n;
  }
  // Locked. The first n pending bytes (at most what copy_pending returned) are written.
  void consume(size_t n) {
    tail_.store(tail_.load(std::memory_order_relaxed) + n, std::memory_order_release);
  }

  // After fork, in the child: the parent's pending bytes are the parent's to write, and a drain
  // that held the flag in another thread will never finish.
  void reset_after_fork() {
    busy_.reset();
    tail_.store(head_.load());
  }

  bool empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }

 private:
  void drain_locked(BlockWriter& out);

  std::atomic<uint64_t> head_{0};
  std::atomic<uint64_t> tail_{0};
  SpinLock busy_;
  uint8_t data_[kCapacity];
};

}  // namespace gpumemshim::shim

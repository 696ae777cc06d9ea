// Every byte of a format 3 trace after its header goes through here: whole records framed as one
// block (format/block.h) and written with one writev(2) under the process-wide writer lock, which
// also assigns the block's sequence number, so sequence order is file order. The file is opened
// without O_APPEND: the lock orders the writes and the file offset follows them, and pwrite(2) can
// then mark the header in place when a write fails (Linux ignores pwrite's offset on O_APPEND).
//
// A failed write (ENOSPC, EIO, EFBIG, EDQUOT, a short write) is reported once, marks the header and
// stops the data: later blocks are dropped but still counted (their sequence numbers are used up
// and End's counts include them), so a reader sees what it did not get. The End block is still
// tried once. The host program never sees any of it.
//
// Slow paths only (drains, flushes, exit): never on a hook's per-event path.
#pragma once
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "gpumemshim/format/block.h"
#include "spin_lock.h"

namespace gpumemshim::shim {

// The format's block compression (format/block_codec.h) with its state and output buffer both
// mmap'ed: no malloc, so it may run on the exit path of any thread. One owner at a time (the
// flusher's ordered flush, or exit/exec).
class Compressor {
 public:
  // Compresses raw into the internal buffer; returns the compressed size, or 0 when it could not
  // (no memory, or the result is not smaller): the block then goes raw.
  size_t compress(const uint8_t* raw, size_t n);
  const uint8_t* output() const { return out_; }

 private:
  bool ensure_state();
  bool ensure_output(size_t bound);

  void* state_ = nullptr;
  uint8_t* out_ = nullptr;
  size_t out_capacity_ = 0;
  bool state_failed_ = false;
};

class BlockWriter {
 public:
  // A fresh file: writes its header; then sequence 0, nothing written, no error. path is kept for
  // the warning (the caller's buffer outlives the writer's use). Returns 0 or the errno of the
  // header's write (the caller then gives the file up).
  int start(int fd, const char* path);
  // In a forked child: the parent's file, counts and lock are not the child's.
  void forget_after_fork();

  // From now on every wait for the writer lock is bounded (a block that cannot get it is
  // dropped): set on the _exit path, which may run in a signal handler that interrupted a write.
  void set_bounded() { bounded_.store(true, std::memory_order_relaxed); }

  // One block of whole records, raw (recording threads: no compression on their time). The
  // payload may come in two parts (a ring's wrapped bytes). Takes the writer lock.
  void write_raw(const uint8_t* a, size_t an, const uint8_t* b = nullptr, size_t bn = 0);
  // One block, compressed with z when that makes it smaller (the flusher, exit and exec).
  void write_compressed(const uint8_t* raw, size_t n, Compressor& z);
  // The End block: the End record with the counts of everything before it. Tried once even after
  // a failed write. Blocks after it are not written: End is the last record of the file.
  void write_end(uint64_t time_ns);
  // exec failed after write_end: the process goes on, so does its trace (a reader then finds the
  // End of the exec attempt in the middle and the one of the real end last).
  void reopen_after_end();

  // A block is being written now (a hint: the file is making progress, however slowly).
  bool writing() const { return lock_.held(); }

  bool failed() const { return write_error_.load(std::memory_order_relaxed) != 0; }
  uint32_t write_error() const { return write_error_.load(std::memory_order_relaxed); }

 private:
  // Locked. Frames and writes one block; stored = the payload as written (raw or LZ4).
  void emit_locked(const iovec* payload, int parts, uint32_t stored, uint32_t raw_size,
                   uint32_t records, format::BlockCodec codec, uint64_t hash, bool even_if_failed);
  void reset(int fd, const char* path);
  int write_all(iovec* iov, int count, size_t total);
  void fail(int err);
  bool take_lock();

  SpinLock lock_;
  std::atomic<bool> bounded_{false};
  bool ended_ = false;
  int fd_ = -1;
  const char* path_ = "";
  uint64_t offset_ = 0;   // bytes in the file: the next write's offset
  uint32_t seq_ = 0;      // the next block's
  uint64_t records_ = 0;  // records in every block so far, written or dropped
  uint64_t dropped_blocks_ = 0;
  std::atomic<uint32_t> write_error_{0};
};

}  // namespace gpumemshim::shim

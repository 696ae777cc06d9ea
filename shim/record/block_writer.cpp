#include "block_writer.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "../log.h"
#include "gpumemshim/format/block_codec.h"
#include "gpumemshim/format/encoder.h"

namespace gpumemshim::shim {

namespace fmtrec = gpumemshim::format;

namespace {

// Blocks below this stay raw: compressing so few records gains next to nothing.
constexpr size_t kMinCompressBytes = 512;
void* map_bytes(void* old, size_t old_size, size_t size) {
  void* p = old ? mremap(old, old_size, size, MREMAP_MAYMOVE)
                : mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// The byte at i of the payload given as two parts.
struct SplitBytes {
  const uint8_t* a;
  size_t an;
  const uint8_t* b;
  uint8_t operator[](size_t i) const { return i < an ? a[i] : b[i - an]; }
};

// count_records() over a payload in two parts (a ring's bytes wrap around its end).
uint32_t count_split(const SplitBytes& p, size_t n) {
  if (p.an == n) return fmtrec::count_records(p.a, n);
  uint32_t count = 0;
  size_t at = 0;
  while (at < n) {
    ++at;
    uint64_t len = 0;
    for (int shift = 0; at < n && shift < 64; shift += 7) {
      uint8_t byte = p[at++];
      len |= uint64_t{byte & 0x7fu} << shift;
      if (!(byte & 0x80)) break;
    }
    if (len > n - at) break;
    at += len;
    ++count;
  }
  return count;
}

}  // namespace

bool Compressor::ensure_state() {
  if (state_) return true;
  if (state_failed_) return false;
  state_ = map_bytes(nullptr, 0, fmtrec::block_compress_state_size());
  state_failed_ = state_ == nullptr;
  return state_ != nullptr;
}

bool Compressor::ensure_output(size_t bound) {
  if (bound <= out_capacity_) return true;
  size_t cap = out_capacity_ ? out_capacity_ : size_t{1} << 20;
  while (cap < bound) cap *= 2;
  void* p = map_bytes(out_, out_capacity_, cap);
  if (!p) return false;
  out_ = static_cast<uint8_t*>(p);
  out_capacity_ = cap;
  return true;
}

size_t Compressor::compress(const uint8_t* raw, size_t n) {
  if (n < kMinCompressBytes || !ensure_state() || !ensure_output(fmtrec::block_compress_bound(n)))
    return 0;
  const size_t r = fmtrec::compress_block(state_, raw, n, out_, out_capacity_);
  return r >= n ? 0 : r;
}

int BlockWriter::start(int fd, const char* path) {
  reset(fd, path);
  if (fd < 0) return 0;
  uint8_t header[fmtrec::kHeaderSizeV3];
  iovec iov{header, fmtrec::encode_header_v3(header, sizeof header)};
  return write_all(&iov, 1, iov.iov_len);
}

void BlockWriter::reset(int fd, const char* path) {
  fd_ = fd;
  path_ = path;
  offset_ = 0;
  seq_ = 0;
  ended_ = false;
  bounded_.store(false);
  records_ = 0;
  dropped_blocks_ = 0;
  write_error_.store(0);
}

void BlockWriter::forget_after_fork() {
  lock_.reset();
  reset(-1, "");
}

void BlockWriter::write_raw(const uint8_t* a, size_t an, const uint8_t* b, size_t bn) {
  if (an + bn == 0) return;
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, a, an);
  if (bn) XXH3_64bits_update(&state, b, bn);
  const uint64_t hash = XXH3_64bits_digest(&state);
  const uint32_t records = count_split({a, an, b}, an + bn);
  const auto size = static_cast<uint32_t>(an + bn);
  iovec payload[2] = {{const_cast<uint8_t*>(a), an}, {const_cast<uint8_t*>(b), bn}};
  if (!take_lock()) return;
  emit_locked(payload, bn ? 2 : 1, size, size, records, fmtrec::BlockCodec::kRaw, hash, false);
  lock_.unlock();
}

void BlockWriter::write_compressed(const uint8_t* raw, size_t n, Compressor& z) {
  if (n == 0) return;
  const uint32_t records = fmtrec::count_records(raw, n);
  const size_t packed = failed() ? 0 : z.compress(raw, n);  // dropped anyway: no time on it
  iovec payload{const_cast<uint8_t*>(packed ? z.output() : raw), packed ? packed : n};
  const uint64_t hash =
      fmtrec::payload_hash(static_cast<const uint8_t*>(payload.iov_base), payload.iov_len);
  if (!take_lock()) return;
  emit_locked(&payload, 1, static_cast<uint32_t>(payload.iov_len), static_cast<uint32_t>(n),
              records, packed ? fmtrec::BlockCodec::kLz4 : fmtrec::BlockCodec::kRaw, hash, false);
  lock_.unlock();
}

bool BlockWriter::take_lock() {
  return lock_.lock(bounded_.load(std::memory_order_relaxed));
}

void BlockWriter::write_end(uint64_t time_ns) {
  if (!take_lock()) return;
  fmtrec::EndRecord end;
  end.time_ns = time_ns;
  end.blocks = seq_;
  end.records = records_;
  end.write_error = write_error();
  uint8_t buf[64];
  size_t n = fmtrec::encode(buf, sizeof buf, end);
  iovec payload{buf, n};
  emit_locked(&payload, 1, static_cast<uint32_t>(n), static_cast<uint32_t>(n), 1,
              fmtrec::BlockCodec::kRaw, fmtrec::payload_hash(buf, n), true);
  ended_ = true;
  lock_.unlock();
}

void BlockWriter::reopen_after_end() {
  lock_.lock();
  ended_ = false;
  lock_.unlock();
}

void BlockWriter::emit_locked(const iovec* payload, int parts, uint32_t stored, uint32_t raw_size,
                              uint32_t records, fmtrec::BlockCodec codec, uint64_t hash,
                              bool even_if_failed) {
  if (ended_) return;             // after End: not part of the trace, not counted
  const int saved_errno = errno;  // a hook's caller may look at errno: it never sees ours
  fmtrec::BlockHeader h;
  h.seq = seq_++;
  h.stored_size = stored;
  h.raw_size = raw_size;
  h.record_count = records;
  h.codec = codec;
  h.payload_hash = hash;
  records_ += records;
  if (fd_ < 0) return;
  if (failed() && !even_if_failed) {
    ++dropped_blocks_;
    return;
  }
  struct RestoreErrno {
    int value;
    ~RestoreErrno() { errno = value; }
  } restore{saved_errno};
  uint8_t head[fmtrec::kBlockHeaderSize];
  fmtrec::encode_block_header(head, h);
  iovec iov[3] = {{head, sizeof head}, payload[0], parts > 1 ? payload[1] : iovec{nullptr, 0}};
  if (int err = write_all(iov, parts + 1, sizeof head + stored)) {
    fail(err);
    ++dropped_blocks_;
  }
}

// One writev of the whole block; 0 or the errno that stopped it. A short write continues with the
// rest while the disk takes bytes (each round makes progress, so this ends); the first error stops
// it. A write that would pass RLIMIT_FSIZE is not made: past the limit the kernel would send
// SIGXFSZ, whose default action kills the host program.
int BlockWriter::write_all(iovec* iov, int count, size_t total) {
  rlimit limit;
  if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      offset_ + total > limit.rlim_cur)
    return EFBIG;
  while (total > 0) {
    ssize_t w = ::writev(fd_, iov, count);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 && errno != 0 ? errno : EIO;
    offset_ += static_cast<uint64_t>(w);
    total -= static_cast<size_t>(w);
    for (auto done = static_cast<size_t>(w); done > 0 && count > 0;) {
      size_t step = done < iov->iov_len ? done : iov->iov_len;
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + step;
      iov->iov_len -= step;
      done -= step;
      if (iov->iov_len == 0) {
        ++iov;
        --count;
      }
    }
  }
  return 0;
}

// The first failure only: one warning, and the header's flag and errno set in place (those bytes
// exist already, so this needs no new space).
void BlockWriter::fail(int err) {
  uint32_t expected = 0;
  if (!write_error_.compare_exchange_strong(expected, static_cast<uint32_t>(err))) return;
  uint8_t mark[8];
  fmtrec::detail::put32(mark, fmtrec::kHeaderWriteFailed);
  fmtrec::detail::put32(mark + 4, static_cast<uint32_t>(err));
  ssize_t ignored = ::pwrite(fd_, mark, sizeof mark, fmtrec::kHeaderFlagsOffset);
  (void)ignored;
  log_warn("cannot write trace %s: %s; the trace is incomplete from here and marked write-failed",
           path_, std::strerror(err));
}

}  // namespace gpumemshim::shim

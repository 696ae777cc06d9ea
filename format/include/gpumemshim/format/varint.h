// LEB128 varints and a bounds-checked byte writer/reader. No allocation: the writer is used inside
// the shim's hooks.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace gpumemshim::format {

inline uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
inline int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// GCC 12 at -O3 reports a false "writing into a region of size 0" for the bounds-checked store
// below once it is inlined into a caller with a small stack buffer (GCC bug 105651 family). Clang
// has no such warning (and -Werror rejects the unknown name).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
// Appends to a fixed buffer; once anything does not fit, ok() is false and nothing more is written.
class ByteWriter {
 public:
  ByteWriter(uint8_t* data, size_t capacity) : data_(data), capacity_(capacity) {}
  void u8(uint8_t v) {
    if (size_ < capacity_) data_[size_++] = v; else ok_ = false;
  }
  void varint(uint64_t v) {
    while (v >= 0x80) {
      u8(static_cast<uint8_t>(v) | 0x80);
      v >>= 7;
    }
    u8(static_cast<uint8_t>(v));
  }
  void svarint(int64_t v) { varint(zigzag(v)); }
  void bytes(std::string_view s) {
    varint(s.size());
    if (capacity_ - size_ < s.size()) { ok_ = false; return; }
    if (s.empty()) return;  // an empty view's data() may be null: no memcpy (UBSan)
    std::memcpy(data_ + size_, s.data(), s.size());
    size_ += s.size();
  }
  bool ok() const { return ok_; }
  size_t size() const { return size_; }
  uint8_t* data() { return data_; }

 private:
  uint8_t* data_;
  size_t capacity_;
  size_t size_ = 0;
  bool ok_ = true;
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Reads from a span; any read past the end sets failed() and yields zeros. `readable_end` (at or
// after the span's end) is how far memory may be read: a varint that starts at least ten bytes
// before it is decoded without a bounds check per byte, and checked against the span after.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, const uint8_t* readable_end = nullptr)
      : p_(data), end_(data + size), readable_(readable_end && readable_end > end_ ? readable_end : end_) {}
  uint8_t u8() {
    if (p_ == end_) { failed_ = true; return 0; }
    return *p_++;
  }
  uint64_t varint() {
    // The reader decodes tens of millions of these: with ten bytes left (a varint's longest)
    // the loop needs no bounds check.
    if (static_cast<size_t>(readable_ - p_) >= 10) [[likely]] {
      const uint8_t* start = p_;
      uint64_t b = *p_++;
      uint64_t v = b & 0x7f;
      for (int shift = 7; (b & 0x80) && shift < 64; shift += 7) {
        b = *p_++;
        v |= (b & 0x7f) << shift;
      }
      if (!(b & 0x80) && p_ <= end_) [[likely]] return v;
      p_ = start;  // past the span, or more than 10 bytes: the careful path says which
    }
    return varint_near_end();
  }
  // The same value as varint(), for fields whose byte count changes from record to record
  // (addresses, sizes, stack hashes): the loop above then mispredicts its exit about once per
  // field; this reads two words and finds the length with no branch on it. Needs 16 readable bytes.
  [[gnu::always_inline]] uint64_t varint_varying() {
    if constexpr (std::endian::native == std::endian::little) {
      if (static_cast<size_t>(readable_ - p_) >= 16) [[likely]] {
        constexpr uint64_t kStop = 0x8080808080808080ull, kTop = uint64_t{1} << 63;
        uint64_t w0, w1;
        std::memcpy(&w0, p_, 8);
        std::memcpy(&w1, p_ + 8, 8);
        const uint64_t s0 = ~w0 & kStop, s1 = ~w1 & kStop;
        // bytes taken from each word: n0 = 1..8, then n1 = 0 (it ended in w0) or 1..8
        const unsigned n0 = (static_cast<unsigned>(std::countr_zero(s0 | kTop)) >> 3) + 1;
        const unsigned n1 = ((static_cast<unsigned>(std::countr_zero(s1 | kTop)) >> 3) + 1) &
                            (s0 == 0 ? ~0u : 0u);
        if (n1 <= 2 && n0 + n1 <= static_cast<size_t>(end_ - p_)) [[likely]] {  // else: careful path
          p_ += n0 + n1;
          const uint64_t lo = compact7(w0 & (~uint64_t{0} >> (64 - 8 * n0)));
          const uint64_t hi = compact7(w1 & ((uint64_t{1} << (8 * n1)) - 1));
          return lo | (hi << 56);  // the tenth byte keeps only bit 63, as in the loop
        }
      }
    }
    return varint_near_end();
  }
  int64_t svarint() { return unzigzag(varint()); }
  std::string_view bytes() {
    uint64_t n = varint();
    if (failed_ || n > static_cast<uint64_t>(end_ - p_)) { failed_ = true; return {}; }
    std::string_view s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  bool failed() const { return failed_; }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  const uint8_t* position() const { return p_; }

 private:
  // Eight little-endian varint bytes, continuation bits ignored: their 7-bit groups side by side.
  static uint64_t compact7(uint64_t w) {
    w = ((w & 0x7f007f007f007f00ull) >> 1) | (w & 0x007f007f007f007full);
    w = ((w & 0x3fff00003fff0000ull) >> 2) | (w & 0x00003fff00003fffull);
    return ((w & 0x0fffffff00000000ull) >> 4) | (w & 0x000000000fffffffull);
  }
  [[gnu::noinline]] uint64_t varint_near_end() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) { failed_ = true; return 0; }
      uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    failed_ = true;  // more than 10 bytes: not a varint
    return 0;
  }

  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* readable_;
  bool failed_ = false;
};

}  // namespace gpumemshim::format

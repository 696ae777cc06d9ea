// The fixed little-endian payloads of the hot records in format 2.x (docs/trace-format.md): Alloc,
// Free and TorchEvent. Header-only and inline: the shim writes them in its hooks, the trace
// reader reads them per event. Every field is at a constant offset, so decoding is a few
// unaligned loads (memcpy: no alignment or aliasing assumptions) with no branch on the data.
//
// The readers here do no bounds checks: the caller has checked that the payload holds at least
// the layout's size (a later minor version may append fields; they are ignored).
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gpumemshim/format/records.h"

namespace gpumemshim::format {

// Payload sizes of the fixed layouts (format 2.0).
inline constexpr size_t kFixedAllocSize = 48;
inline constexpr size_t kFixedFreeSize = 44;
inline constexpr size_t kFixedTorchEventSize = 48;
// time_ns (u64 @0) and thread (u32 @8) lead all three layouts.
inline constexpr size_t kFixedTimeAndThreadSize = 12;

// Whether a record type has a fixed-layout payload in a 2.x file.
inline constexpr bool is_fixed_layout_type(RecordType type) {
  return type == RecordType::kAlloc || type == RecordType::kFree || type == RecordType::kTorchEvent;
}

// The payload size a fixed-layout record needs (0: the type has no fixed layout).
inline constexpr size_t fixed_payload_size(RecordType type) {
  switch (type) {
    case RecordType::kAlloc: return kFixedAllocSize;
    case RecordType::kFree: return kFixedFreeSize;
    case RecordType::kTorchEvent: return kFixedTorchEventSize;
    default: return 0;
  }
}

namespace fixed {

template <typename T>
inline T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big && sizeof(T) > 1) {
    if constexpr (sizeof(T) == 2) v = static_cast<T>(__builtin_bswap16(static_cast<uint16_t>(v)));
    else if constexpr (sizeof(T) == 4) v = static_cast<T>(__builtin_bswap32(static_cast<uint32_t>(v)));
    else v = static_cast<T>(__builtin_bswap64(static_cast<uint64_t>(v)));
  }
  return v;
}

template <typename T>
inline void store(uint8_t* p, T v) {
  if constexpr (std::endian::native == std::endian::big && sizeof(T) > 1) {
    if constexpr (sizeof(T) == 2) v = static_cast<T>(__builtin_bswap16(static_cast<uint16_t>(v)));
    else if constexpr (sizeof(T) == 4) v = static_cast<T>(__builtin_bswap32(static_cast<uint32_t>(v)));
    else v = static_cast<T>(__builtin_bswap64(static_cast<uint64_t>(v)));
  }
  std::memcpy(p, &v, sizeof v);
}

// The device as stored: i16, values outside its range saturated (CUDA ordinals are small; -1 is
// "not looked up").
inline int16_t device_i16(int32_t device) {
  return static_cast<int16_t>(device < INT16_MIN ? INT16_MIN : device > INT16_MAX ? INT16_MAX : device);
}

inline bool memory_kind_ok(MemoryKind kind) {
  auto k = static_cast<uint8_t>(kind);
  return k >= 1 && k <= kMemoryKindMax;
}

// The 16-byte head of Alloc and Free: time, thread, device, api, memory kind.
template <typename Rec>
inline void put_head(uint8_t* p, const Rec& r) {
  store<uint64_t>(p + 0, r.time_ns);
  store<uint32_t>(p + 8, static_cast<uint32_t>(r.thread_id));
  store<int16_t>(p + 12, device_i16(r.device));
  p[14] = static_cast<uint8_t>(r.api);
  p[15] = static_cast<uint8_t>(r.kind);
}

template <typename Rec>
inline void get_head(const uint8_t* p, Rec& o) {
  o.time_ns = load<uint64_t>(p + 0);
  o.thread_id = load<uint32_t>(p + 8);
  o.device = load<int16_t>(p + 12);
  o.api = static_cast<Api>(p[14]);
  o.kind = static_cast<MemoryKind>(p[15]);
}

}  // namespace fixed

// Writers: `payload` has room for the layout's size.
inline void encode_fixed(uint8_t* p, const AllocRecord& r) {
  fixed::put_head(p, r);
  fixed::store<uint64_t>(p + 16, r.address);
  fixed::store<uint64_t>(p + 24, r.size);
  fixed::store<uint64_t>(p + 32, r.stack_id);
  fixed::store<uint64_t>(p + 40, r.stream);
}

inline void encode_fixed(uint8_t* p, const FreeRecord& r) {
  fixed::put_head(p, r);
  fixed::store<uint64_t>(p + 16, r.address);
  fixed::store<uint64_t>(p + 24, r.stack_id);
  fixed::store<uint64_t>(p + 32, r.stream);
  fixed::store<uint32_t>(p + 40, r.result);
}

inline void encode_fixed(uint8_t* p, const TorchEventRecord& r) {
  fixed::store<uint64_t>(p + 0, r.time_ns);
  fixed::store<uint32_t>(p + 8, static_cast<uint32_t>(r.thread_id));
  fixed::store<int16_t>(p + 12, fixed::device_i16(r.device));
  p[14] = static_cast<uint8_t>(r.action);
  p[15] = 0;  // reserved
  fixed::store<uint64_t>(p + 16, r.address);
  fixed::store<uint64_t>(p + 24, r.size);
  fixed::store<uint64_t>(p + 32, r.stack_id);
  fixed::store<uint64_t>(p + 40, r.stream);
}

// Readers: `payload` holds at least the layout's size. False for a memory kind out of range
// (1..kMemoryKindMax), as the varint decoder; the fields are read either way.
inline bool decode_fixed(const uint8_t* p, AllocRecord& o) {
  fixed::get_head(p, o);
  o.address = fixed::load<uint64_t>(p + 16);
  o.size = fixed::load<uint64_t>(p + 24);
  o.stack_id = fixed::load<uint64_t>(p + 32);
  o.stream = fixed::load<uint64_t>(p + 40);
  return fixed::memory_kind_ok(o.kind);
}

inline bool decode_fixed(const uint8_t* p, FreeRecord& o) {
  fixed::get_head(p, o);
  o.address = fixed::load<uint64_t>(p + 16);
  o.stack_id = fixed::load<uint64_t>(p + 24);
  o.stream = fixed::load<uint64_t>(p + 32);
  o.result = fixed::load<uint32_t>(p + 40);
  return fixed::memory_kind_ok(o.kind);
}

// Any action value (append-only: unknown ones are for the reader to ignore); the reserved byte is
// not checked.
inline bool decode_fixed(const uint8_t* p, TorchEventRecord& o) {
  o.time_ns = fixed::load<uint64_t>(p + 0);
  o.thread_id = fixed::load<uint32_t>(p + 8);
  o.device = fixed::load<int16_t>(p + 12);
  o.action = static_cast<TorchAction>(p[14]);
  o.address = fixed::load<uint64_t>(p + 16);
  o.size = fixed::load<uint64_t>(p + 24);
  o.stack_id = fixed::load<uint64_t>(p + 32);
  o.stream = fixed::load<uint64_t>(p + 40);
  return true;
}

// A record's payload of `size` bytes (its length): false when shorter than its layout, else as
// above. The one place the length rule lives, for the decoder and the reader's inline path.
template <typename Rec>
inline constexpr size_t kFixedSizeOf = 0;  // only the three hot records have one
template <>
inline constexpr size_t kFixedSizeOf<AllocRecord> = kFixedAllocSize;
template <>
inline constexpr size_t kFixedSizeOf<FreeRecord> = kFixedFreeSize;
template <>
inline constexpr size_t kFixedSizeOf<TorchEventRecord> = kFixedTorchEventSize;
template <typename Rec>
inline bool decode_fixed(const uint8_t* p, size_t size, Rec& o) {
  return size >= kFixedSizeOf<Rec> && decode_fixed(p, o);
}

// The leading time and thread of any fixed-layout payload (at least kFixedTimeAndThreadSize
// bytes): what a reader needs to put events in time order before decoding them.
struct FixedTimeAndThread {
  uint64_t time_ns;
  uint64_t thread_id;
};
inline FixedTimeAndThread fixed_time_and_thread(const uint8_t* p) {
  return {fixed::load<uint64_t>(p), fixed::load<uint32_t>(p + 8)};
}

}  // namespace gpumemshim::format

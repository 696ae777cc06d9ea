// Encodes one record into a caller-provided buffer. Header-only and allocation-free because the
// shim calls it from inside CUDA hooks. Each function returns the bytes written, or 0 when the
// record does not fit (the caller then drops or retries with a bigger buffer).
#pragma once
#include <cstring>

#include "gpumemshim/format/records.h"
#include "gpumemshim/format/varint.h"

namespace gpumemshim::format {

// File header: magic, version major, version minor, flags (all little-endian).
inline size_t encode_header(uint8_t* out, size_t capacity) {
  if (capacity < kHeaderSize) return 0;
  std::memcpy(out, kMagic, 8);
  out[8] = kVersionMajor & 0xff; out[9] = kVersionMajor >> 8;
  out[10] = kVersionMinor & 0xff; out[11] = kVersionMinor >> 8;
  std::memset(out + 12, 0, 4);
  return kHeaderSize;
}

namespace detail {
// A record is: type (1 byte), payload length (varint), payload. The payload is written after a
// 3-byte gap (enough for lengths < 2 MiB) and moved down once its length is known.
template <typename Fill>
size_t frame(uint8_t* out, size_t capacity, RecordType type, Fill&& fill) {
  constexpr size_t kGap = 4;
  if (capacity <= kGap) return 0;
  ByteWriter payload(out + kGap, capacity - kGap);
  fill(payload);
  if (!payload.ok() || payload.size() >= (1u << 21)) return 0;
  uint8_t head[12];  // room for any varint, so no bounds warning can apply
  ByteWriter h(head, sizeof head);
  h.u8(static_cast<uint8_t>(type));
  h.varint(payload.size());
  std::memmove(out + h.size(), out + kGap, payload.size());
  std::memcpy(out, head, h.size());
  return h.size() + payload.size();
}
}  // namespace detail

inline size_t encode(uint8_t* out, size_t cap, const ProcessRecord& r) {
  return detail::frame(out, cap, RecordType::kProcess, [&](ByteWriter& w) {
    w.varint(r.pid); w.varint(r.ppid); w.svarint(r.rank);
    w.varint(r.start_wall_ns); w.varint(r.start_mono_ns);
    w.bytes(r.host); w.bytes(r.command_line); w.bytes(r.executable);
  });
}

inline size_t encode(uint8_t* out, size_t cap, const ModuleRecord& r) {
  return detail::frame(out, cap, RecordType::kModule, [&](ByteWriter& w) {
    w.varint(r.load_bias); w.varint(r.start); w.varint(r.size);
    w.bytes(r.build_id); w.bytes(r.path);
  });
}

// Frames are delta-encoded against the previous frame: return addresses of one stack cluster.
inline size_t encode(uint8_t* out, size_t cap, const StackRecord& r) {
  return detail::frame(out, cap, RecordType::kStack, [&](ByteWriter& w) {
    w.varint(r.id); w.varint(r.frame_count);
    uint64_t prev = 0;
    for (uint32_t i = 0; i < r.frame_count; ++i) {
      w.svarint(static_cast<int64_t>(r.frames[i] - prev));
      prev = r.frames[i];
    }
  });
}

inline size_t encode(uint8_t* out, size_t cap, const AllocRecord& r) {
  return detail::frame(out, cap, RecordType::kAlloc, [&](ByteWriter& w) {
    w.varint(r.time_ns); w.varint(r.thread_id); w.svarint(r.device); w.varint(r.stream);
    w.u8(static_cast<uint8_t>(r.api)); w.u8(static_cast<uint8_t>(r.kind));
    w.varint(r.address); w.varint(r.size); w.varint(r.stack_id);
  });
}

inline size_t encode(uint8_t* out, size_t cap, const FreeRecord& r) {
  return detail::frame(out, cap, RecordType::kFree, [&](ByteWriter& w) {
    w.varint(r.time_ns); w.varint(r.thread_id); w.svarint(r.device); w.varint(r.stream);
    w.u8(static_cast<uint8_t>(r.api)); w.u8(static_cast<uint8_t>(r.kind));
    w.varint(r.address); w.varint(r.stack_id); w.varint(r.result);
  });
}

inline size_t encode(uint8_t* out, size_t cap, const AllocFailedRecord& r) {
  return detail::frame(out, cap, RecordType::kAllocFailed, [&](ByteWriter& w) {
    w.varint(r.time_ns); w.varint(r.thread_id); w.svarint(r.device); w.varint(r.stream);
    w.u8(static_cast<uint8_t>(r.api)); w.u8(static_cast<uint8_t>(r.kind));
    w.varint(r.size); w.varint(r.error); w.varint(r.stack_id);
  });
}

inline size_t encode(uint8_t* out, size_t cap, const MemInfoRecord& r) {
  return detail::frame(out, cap, RecordType::kMemInfo, [&](ByteWriter& w) {
    w.varint(r.time_ns); w.svarint(r.device); w.varint(r.free_bytes); w.varint(r.total_bytes);
  });
}

inline size_t encode(uint8_t* out, size_t cap, const MarkerRecord& r) {
  return detail::frame(out, cap, RecordType::kMarker, [&](ByteWriter& w) {
    w.varint(r.time_ns); w.varint(r.thread_id); w.u8(static_cast<uint8_t>(r.kind));
    w.bytes(r.name);
  });
}

inline size_t encode(uint8_t* out, size_t cap, const DeviceRecord& r) {
  return detail::frame(out, cap, RecordType::kDevice, [&](ByteWriter& w) {
    w.svarint(r.device); w.varint(r.total_bytes); w.bytes(r.name);
  });
}

inline size_t encode(uint8_t* out, size_t cap, const AttributeRecord& r) {
  return detail::frame(out, cap, RecordType::kAttribute, [&](ByteWriter& w) {
    w.bytes(r.key); w.bytes(r.value);
  });
}

inline size_t encode(uint8_t* out, size_t cap, const EndRecord& r) {
  return detail::frame(out, cap, RecordType::kEnd, [&](ByteWriter& w) { w.varint(r.time_ns); });
}

}  // namespace gpumemshim::format

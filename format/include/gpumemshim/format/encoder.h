// Encodes one record into a caller-provided buffer. Header-only and allocation-free because the
// shim calls it from inside CUDA hooks. Each function returns the bytes written, or 0 when the
// record does not fit (the caller then drops or retries with a bigger buffer).
#pragma once
#include <algorithm>
#include <cstring>

#include "gpumemshim/format/fixed_layout.h"
#include "gpumemshim/format/records.h"
#include "gpumemshim/format/varint.h"

namespace gpumemshim::format {

// File header: magic, version major, version minor, then zeros (flags; in format 3 also the write
// error and reserved bytes), all little-endian: 16 bytes for formats 1 and 2, 32 for format 3. The
// version decides the hot records' layout: a 2.x or 3.x file needs encode(), a 1.x file
// encode_v1() (or encode_for()); a 3.x file's records go in blocks (block.h).
inline size_t encode_header(uint8_t* out, size_t capacity, Version v) {
  const size_t size = has_blocks(v) ? 32 : kHeaderSize;
  if (capacity < size) return 0;
  std::memset(out, 0, size);
  std::memcpy(out, kMagic, 8);
  out[8] = static_cast<uint8_t>(v.major & 0xff); out[9] = static_cast<uint8_t>(v.major >> 8);
  out[10] = static_cast<uint8_t>(v.minor & 0xff); out[11] = static_cast<uint8_t>(v.minor >> 8);
  return size;
}
// The version this gpumemshim writes (kVersion).
inline size_t encode_header(uint8_t* out, size_t capacity) { return encode_header(out, capacity, kVersion); }

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

// Unchecked writes for the varint event records (AllocFailed, MemInfo, ProcessMemory; the hot
// records of 1.x).
// Their payloads are at most 80 bytes, so the length is one byte and no bounds check is needed
// once 2 + 128 bytes are free.
inline uint8_t* put_varint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v) | 0x80;
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}
inline uint8_t* put_svarint(uint8_t* p, int64_t v) { return put_varint(p, zigzag(v)); }

inline constexpr size_t kMaxEventPayload = 127;

template <typename Fill>
size_t event_frame(uint8_t* out, size_t capacity, RecordType type, Fill&& fill) {
  if (capacity < 2 + kMaxEventPayload) return 0;
  out[0] = static_cast<uint8_t>(type);
  uint8_t* end = fill(out + 2);
  size_t n = static_cast<size_t>(end - (out + 2));
  out[1] = static_cast<uint8_t>(n);
  return n + 2;
}

// A hot record in its 2.x fixed layout (fixed_layout.h): type, one length byte, the payload's
// constant-offset stores. No loops, no varints.
template <size_t kSize, typename Rec>
size_t fixed_frame(uint8_t* out, size_t capacity, RecordType type, const Rec& r) {
  static_assert(kSize < 0x80, "the length must be one varint byte");
  if (capacity < 2 + kSize) return 0;
  out[0] = static_cast<uint8_t>(type);
  out[1] = static_cast<uint8_t>(kSize);
  encode_fixed(out + 2, r);
  return 2 + kSize;
}

template <typename Rec>
uint8_t* put_event_head(uint8_t* p, const Rec& r) {
  p = put_varint(p, r.time_ns);
  p = put_varint(p, r.thread_id);
  p = put_svarint(p, r.device);
  p = put_varint(p, r.stream);
  *p++ = static_cast<uint8_t>(r.api);
  *p++ = static_cast<uint8_t>(r.kind);
  return p;
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

// The hot records, format 2.x: fixed little-endian payloads (fixed_layout.h).
inline size_t encode(uint8_t* out, size_t cap, const AllocRecord& r) {
  return detail::fixed_frame<kFixedAllocSize>(out, cap, RecordType::kAlloc, r);
}

inline size_t encode(uint8_t* out, size_t cap, const FreeRecord& r) {
  return detail::fixed_frame<kFixedFreeSize>(out, cap, RecordType::kFree, r);
}

inline size_t encode(uint8_t* out, size_t cap, const TorchEventRecord& r) {
  return detail::fixed_frame<kFixedTorchEventSize>(out, cap, RecordType::kTorchEvent, r);
}

// The most bytes encode() writes for a hot record: with this much room it never returns 0, so a
// writer can encode one straight into its buffer.
inline constexpr size_t kMaxHotRecordSize =
    2 + std::max({kFixedAllocSize, kFixedFreeSize, kFixedTorchEventSize});

// The hot records as format 1.x has them (varint payloads), for writing 1.x traces (tests, the
// benchmark generator's --format-1). Only valid in a file whose header says 1.x.
inline size_t encode_v1(uint8_t* out, size_t cap, const AllocRecord& r) {
  return detail::event_frame(out, cap, RecordType::kAlloc, [&](uint8_t* p) {
    p = detail::put_event_head(p, r);
    p = detail::put_varint(p, r.address);
    p = detail::put_varint(p, r.size);
    return detail::put_varint(p, r.stack_id);
  });
}

inline size_t encode_v1(uint8_t* out, size_t cap, const FreeRecord& r) {
  return detail::event_frame(out, cap, RecordType::kFree, [&](uint8_t* p) {
    p = detail::put_event_head(p, r);
    p = detail::put_varint(p, r.address);
    p = detail::put_varint(p, r.stack_id);
    return detail::put_varint(p, r.result);
  });
}

inline size_t encode_v1(uint8_t* out, size_t cap, const TorchEventRecord& r) {
  return detail::event_frame(out, cap, RecordType::kTorchEvent, [&](uint8_t* p) {
    p = detail::put_varint(p, r.time_ns);
    p = detail::put_varint(p, r.thread_id);
    p = detail::put_svarint(p, r.device);
    p = detail::put_varint(p, r.stream);
    *p++ = static_cast<uint8_t>(r.action);
    p = detail::put_varint(p, r.address);
    p = detail::put_varint(p, r.size);
    return detail::put_varint(p, r.stack_id);
  });
}

inline size_t encode(uint8_t* out, size_t cap, const AllocFailedRecord& r) {
  return detail::event_frame(out, cap, RecordType::kAllocFailed, [&](uint8_t* p) {
    p = detail::put_event_head(p, r);
    p = detail::put_varint(p, r.size);
    p = detail::put_varint(p, r.error);
    return detail::put_varint(p, r.stack_id);
  });
}

inline size_t encode(uint8_t* out, size_t cap, const StackLabelRecord& r) {
  return detail::frame(out, cap, RecordType::kStackLabel, [&](ByteWriter& w) {
    w.varint(r.stack_id); w.bytes(r.label);
  });
}

inline size_t encode(uint8_t* out, size_t cap, const MemInfoRecord& r) {
  return detail::event_frame(out, cap, RecordType::kMemInfo, [&](uint8_t* p) {
    p = detail::put_varint(p, r.time_ns);
    p = detail::put_svarint(p, r.device);
    p = detail::put_varint(p, r.free_bytes);
    return detail::put_varint(p, r.total_bytes);
  });
}

inline size_t encode(uint8_t* out, size_t cap, const ProcessMemoryRecord& r) {
  return detail::event_frame(out, cap, RecordType::kProcessMemory, [&](uint8_t* p) {
    p = detail::put_varint(p, r.time_ns);
    p = detail::put_svarint(p, r.device);
    *p++ = r.flags;
    p = detail::put_varint(p, r.process_used_bytes);
    p = detail::put_varint(p, r.device_used_bytes);
    return detail::put_varint(p, r.device_total_bytes);
  });
}

inline size_t encode(uint8_t* out, size_t cap, const MarkerRecord& r) {
  return detail::frame(out, cap, RecordType::kMarker, [&](ByteWriter& w) {
    w.varint(r.time_ns); w.varint(r.thread_id); w.u8(static_cast<uint8_t>(r.kind));
    w.bytes(r.name); w.varint(r.stack_id);
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
  return detail::frame(out, cap, RecordType::kEnd, [&](ByteWriter& w) {
    w.varint(r.time_ns);
    w.varint(r.blocks);
    w.varint(r.records);
    w.varint(r.write_error);
  });
}

inline size_t encode(uint8_t* out, size_t cap, const FlushRecord& r) {
  return detail::frame(out, cap, RecordType::kFlush, [&](ByteWriter& w) { w.varint(r.time_ns); });
}

inline size_t encode(uint8_t* out, size_t cap, const PyCodeRecord& r) {
  return detail::frame(out, cap, RecordType::kPyCode, [&](ByteWriter& w) {
    w.varint(r.code_id); w.varint(r.first_line);
    w.bytes(r.filename); w.bytes(r.name); w.bytes(r.line_table);
    w.u8(r.python_minor);
  });
}

inline size_t encode(uint8_t* out, size_t cap, const PyStackRecord& r) {
  return detail::frame(out, cap, RecordType::kPyStack, [&](ByteWriter& w) {
    w.varint(r.stack_id); w.varint(r.frame_count);
    for (uint32_t i = 0; i < r.frame_count; ++i) {
      w.varint(r.frames[i].code_id); w.varint(r.frames[i].instr_offset); w.u8(r.frames[i].flags);
    }
  });
}

// Any record as a file of version `v` has it: the hot records' 1.x varint payloads when v is 1.x,
// else what encode() writes.
template <typename Rec>
size_t encode_for(Version v, uint8_t* out, size_t cap, const Rec& r) {
  if constexpr (requires { encode_v1(out, cap, r); }) {
    if (!has_fixed_layout(v)) return encode_v1(out, cap, r);
  }
  return encode(out, cap, r);
}

}  // namespace gpumemshim::format

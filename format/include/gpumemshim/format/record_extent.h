// The framing and the time of one encoded record, for a writer that reorders whole records (the
// shim's flusher puts each flush in time order across threads). Header-only, no allocation: it
// runs inside the traced process.
#pragma once
#include <cstddef>
#include <cstdint>

#include "gpumemshim/format/fixed_layout.h"
#include "gpumemshim/format/records.h"
#include "gpumemshim/format/varint.h"

namespace gpumemshim::format {

struct RecordExtent {
  size_t size = 0;  // type byte, length varint and payload
  // an event with a time: Alloc, Free, AllocFailed, MemInfo, Marker, TorchEvent, ProcessMemory
  bool timed = false;
  uint64_t time_ns = 0;  // when timed
};

// The record at p (n bytes readable) as written in a 2.x file; false when [p, p + n) does not hold
// a whole record. A timed record too short to hold its time counts as untimed.
inline bool record_extent(const uint8_t* p, size_t n, RecordExtent& out) {
  if (n < 2) return false;
  ByteReader head(p + 1, n - 1);
  const uint64_t length = head.varint();
  if (head.failed() || length > head.remaining()) return false;
  const uint8_t* payload = head.position();
  out.size = static_cast<size_t>(payload - p) + static_cast<size_t>(length);
  out.timed = false;
  out.time_ns = 0;
  const auto type = static_cast<RecordType>(p[0]);
  if (is_fixed_layout_type(type)) {
    if (length >= sizeof(uint64_t)) {
      out.timed = true;
      out.time_ns = fixed::load<uint64_t>(payload);
    }
  } else if (type == RecordType::kAllocFailed || type == RecordType::kMemInfo ||
             type == RecordType::kMarker || type == RecordType::kProcessMemory) {
    ByteReader body(payload, static_cast<size_t>(length));
    out.time_ns = body.varint();
    out.timed = !body.failed();
  }
  return true;
}

}  // namespace gpumemshim::format

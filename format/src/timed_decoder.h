// Decoding of the timed records the orders queue (by a pointer to the record's first byte, its
// type), once each, when they are delivered: the hot records of a 2.x file inline, the rest out of
// line.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "decoder.h"
#include "gpumemshim/format/fixed_layout.h"
#include "gpumemshim/format/trace_reader.h"
#include "gpumemshim/format/varint.h"
#include "read_errors.h"

namespace gpumemshim::format {

using RecordPtr = const uint8_t*;  // a queued record's first byte (its type) in the mapped file

// Decodes the timed record at `rec` (its head was checked when it was read) and calls f(record).
class TimedDecoder {
 public:
  TimedDecoder(const std::string& path, std::span<const uint8_t> bytes, bool fixed_layout)
      : path_(path), bytes_(bytes), fixed_layout_(fixed_layout) {}

  // Inline where it is called: the hot records' path is a few loads; the rest (and its frame of
  // saved registers) is out of line.
  template <typename F>
  [[gnu::always_inline]] void operator()(RecordPtr rec, F&& f) const {
    if (fixed_layout_ && fixed(rec, f)) [[likely]]
      return;
    careful(rec, f);
  }

 private:
  template <typename F>
  [[gnu::noinline]] void careful(RecordPtr rec, F& f) const {
    RawRecord raw = frame(rec);
    switch (raw.type) {
      case RecordType::kAlloc: f(decode_or_throw<AllocRecord>(path_, raw)); break;
      case RecordType::kFree: f(decode_or_throw<FreeRecord>(path_, raw)); break;
      case RecordType::kTorchEvent: f(decode_or_throw<TorchEventRecord>(path_, raw)); break;
      case RecordType::kAllocFailed: f(decode_or_throw<AllocFailedRecord>(path_, raw)); break;
      case RecordType::kMemInfo: f(decode_or_throw<MemInfoRecord>(path_, raw)); break;
      case RecordType::kProcessMemory:
        f(decode_or_throw<ProcessMemoryRecord>(path_, raw));
        break;
      case RecordType::kMarker: f(decode_or_throw<MarkerRecord>(path_, raw)); break;  // text checked when read
      default: break;  // only timed records are queued
    }
  }

  // A hot record of a 2.x file whose length takes one byte (as the shim writes them) is decoded
  // here, inline; false for anything else, and for a malformed one (the careful path says why).
  template <typename F>
  [[gnu::always_inline]] bool fixed(RecordPtr rec, F& f) const {
    if (rec[1] >= 0x80) return false;
    switch (static_cast<RecordType>(*rec)) {
      case RecordType::kAlloc: return fixed_as<AllocRecord>(rec, f);
      case RecordType::kFree: return fixed_as<FreeRecord>(rec, f);
      case RecordType::kTorchEvent: return fixed_as<TorchEventRecord>(rec, f);
      default: return false;
    }
  }
  template <typename Rec, typename F>
  [[gnu::always_inline]] static bool fixed_as(RecordPtr rec, F& f) {
    Rec r;
    if (!decode_fixed(rec + 2, rec[1], r)) return false;
    f(r);
    return true;
  }

  // A record outside the bytes read (format 3 keeps a record with text in memory of its own, see
  // trace_reader.cpp) is whole where it is: its length bounds it.
  RawRecord frame(RecordPtr rec) const {
    const bool in_bytes = rec >= bytes_.data() && rec < bytes_.data() + bytes_.size();
    ByteReader r(rec + 1, in_bytes ? static_cast<size_t>(bytes_.data() + bytes_.size() - rec - 1)
                                   : kMaxVarintBytes);
    RawRecord raw;
    raw.type = static_cast<RecordType>(*rec);
    raw.size = r.varint();
    raw.payload = r.position();
    raw.offset = in_bytes ? static_cast<uint64_t>(rec - bytes_.data()) : 0;
    raw.readable_end = in_bytes ? bytes_.data() + bytes_.size() : nullptr;
    raw.fixed_layout = fixed_layout_;
    return raw;
  }
  static constexpr size_t kMaxVarintBytes = 10;

  const std::string& path_;
  std::span<const uint8_t> bytes_;
  bool fixed_layout_;  // a 2.x file (RawRecord::fixed_layout)
};

// Hands decoded timed records to the sink, counted by API on the way.
class TimedDelivery {
 public:
  explicit TimedDelivery(TraceSink& sink) : sink_(sink) {}

  [[gnu::always_inline]] void operator()(const AllocRecord& r) {
    ++allocs_[static_cast<uint8_t>(r.api)];
    bytes_[static_cast<uint8_t>(r.api)] += r.size;
    sink_.alloc(r);
  }
  [[gnu::always_inline]] void operator()(const FreeRecord& r) {
    ++frees_[static_cast<uint8_t>(r.api)];
    sink_.free(r);
  }
  [[gnu::always_inline]] void operator()(const AllocFailedRecord& r) {
    ++failed_[static_cast<uint8_t>(r.api)];
    sink_.failed(r);
  }
  [[gnu::always_inline]] void operator()(const TorchEventRecord& r) { sink_.torch(r); }
  [[gnu::always_inline]] void operator()(const MemInfoRecord& r) { sink_.meminfo(r); }
  void operator()(const ProcessMemoryRecord& r) { sink_.process_memory(r); }
  [[gnu::always_inline]] void operator()(const MarkerRecord& r) { sink_.marker(r); }

  // The counts by API into `c` (an API out of range counted as unknown, its bytes not).
  void add_counts(TraceCounts& c) const {
    for (size_t i = 0; i < allocs_.size(); ++i) {
      if (i < kApiCount) {
        c.allocs_by_api[i] += allocs_[i];
        c.frees_by_api[i] += frees_[i];
        c.failed_by_api[i] += failed_[i];
        c.bytes_by_api[i] += bytes_[i];
      } else {
        c.unknown_api += allocs_[i] + frees_[i] + failed_[i];
      }
    }
  }

 private:
  TraceSink& sink_;
  // By the API's byte, every value (no range check per record).
  std::array<uint64_t, 256> allocs_{}, frees_{}, failed_{}, bytes_{};
};

}  // namespace gpumemshim::format

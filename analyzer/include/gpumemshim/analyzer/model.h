// What one trace (= one process) says, after loading and replaying it.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpumemshim/analyzer/symbolizer.h"
#include "gpumemshim/format/records.h"

namespace gpumemshim::analyzer {

using format::Api;
using format::MemoryKind;

struct DeviceInfo {
  int32_t device = 0;
  uint64_t total_bytes = 0;
  std::string name;
};

struct ProcessInfo {
  uint64_t pid = 0;
  uint64_t ppid = 0;
  int64_t rank = -1;
  uint64_t start_wall_ns = 0;
  uint64_t start_mono_ns = 0;
  std::string host;
  std::string command_line;
  std::string executable;
  bool has_process_record = false;
};

// Record counts and sizes, for `gpumemshim stats`.
struct TraceStats {
  uint64_t file_bytes = 0;
  uint16_t version_major = 0;
  uint16_t version_minor = 0;
  uint64_t records = 0;
  std::array<uint64_t, 256> by_type{};  // by RecordType value
  uint64_t unknown_records = 0;
  std::array<uint64_t, format::kApiCount> allocs_by_api{};
  std::array<uint64_t, format::kApiCount> frees_by_api{};
  std::array<uint64_t, format::kApiCount> failed_by_api{};
  std::array<uint64_t, format::kApiCount> bytes_by_api{};  // bytes allocated (successful)
  uint64_t unknown_api = 0;                                // events whose api is out of range
  uint64_t max_order_window = 0;  // the most events held at once to replay them in time order
  uint64_t events() const;  // alloc + free + failed + meminfo + marker records
};

// Per memory kind: index = MemoryKind value (0 unused).
struct KindCounters {
  uint64_t allocations = 0;
  uint64_t frees = 0;
  uint64_t live_count = 0;
  uint64_t live_bytes = 0;
  uint64_t peak_bytes = 0;
};
using ByKind = std::array<KindCounters, format::kMemoryKindMax + 1>;

// PyTorch caching-allocator events (TorchEvent records of the torch bridge).
struct TorchCounters {
  uint64_t events = 0;          // every TorchEvent record, any action
  uint64_t allocs = 0;          // tensor blocks handed out
  uint64_t frees = 0;           // blocks back in the cache (free_completed)
  uint64_t segment_allocs = 0;
  uint64_t segment_frees = 0;
  uint64_t ooms = 0;
  uint64_t live_blocks = 0;     // at the end of the trace
  uint64_t live_block_bytes = 0;
};

struct Summary {
  uint64_t allocations = 0;         // successful allocation records
  uint64_t frees = 0;               // successful frees that matched a live allocation
  uint64_t failed_allocations = 0;  // AllocFailed records
  uint64_t failed_frees = 0;        // frees with a nonzero result (the memory stays)
  uint64_t unmatched_frees = 0;     // successful frees of an address not known to be live
  uint64_t peak_bytes = 0;          // peak of live device memory (device+managed+pool+physical)
  uint64_t leaked_bytes = 0;        // after suppressions
  uint64_t leaked_allocations = 0;  // after suppressions
  uint64_t suppressed_bytes = 0;
  uint64_t suppressed_allocations = 0;
  uint64_t retained_bytes = 0;      // kind "retained" (made before the first step), unsuppressed
  uint64_t cached_bytes = 0;        // kind "cached" (a caching allocator's segments at the end)
  uint64_t markers = 0;
  uint64_t steps = 0;
  uint64_t ranges = 0;  // range pushes (NVTX ranges, expect_no_leak regions)
  ByKind by_kind{};
  TorchCounters torch{};
};

// One marker record, as the report lists it.
struct MarkerEvent {
  uint64_t time_ns = 0;
  uint64_t thread_id = 0;
  format::MarkerKind kind = format::MarkerKind::kMark;
  std::string name;
  uint64_t seq = 0;  // position among the trace's markers (file order): breaks time ties
};

// The markers of one trace: every one counted, the earliest kKeep (by time) kept, so memory stays
// bounded however many markers a long run writes.
class MarkerLog {
 public:
  static constexpr size_t kKeep = 10000;
  void add(const format::MarkerRecord& r);
  // The kept markers in time order (ties: file order).
  std::vector<MarkerEvent> sorted() const;
  uint64_t total() const { return total_; }
  uint64_t range_pushes() const { return range_pushes_; }
  uint64_t dropped() const { return total_ - kept_.size(); }

 private:
  std::vector<MarkerEvent> kept_;  // a max-heap by (time, seq) once kKeep are kept
  uint64_t total_ = 0;
  uint64_t range_pushes_ = 0;
};

// True for kinds that are memory (leakable); false for address-space kinds.
bool is_memory_kind(MemoryKind kind);
// True for kinds counted in peak device bytes (inline: the replay asks for every event).
inline bool is_device_memory_kind(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kDevice:
    case MemoryKind::kManaged:
    case MemoryKind::kPool:
    case MemoryKind::kPhysical: return true;
    default: return false;
  }
}

// One native frame after symbolization (a raw pc may give several: inlined ones first).
struct Frame {
  std::string function;
  std::string file;
  uint32_t line = 0;
  std::string module;
  uint64_t pc = 0;
  uint64_t module_offset = 0;  // pc - load bias; 0 when no module is known
  bool inlined = false;
  bool python = false;
};

}  // namespace gpumemshim::analyzer

// Replays one process's alloc/free events: the live set, counters, peaks and failures.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "gpumemshim/analyzer/model.h"
#include "gpumemshim/format/records.h"

namespace gpumemshim::analyzer {

struct LiveAlloc {
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stack_id = 0;
  uint64_t time_ns = 0;
  int32_t device = 0;
  Api api = Api::kUnknown;
  MemoryKind kind = MemoryKind::kDevice;
  uint64_t step = 0;  // steps seen before the allocation (for step-aware findings later)
  bool torch_block = false;  // a tensor block of PyTorch's caching allocator (TorchEvent alloc)
};

struct FailureEvent {
  uint64_t time_ns = 0;
  uint64_t thread_id = 0;
  int32_t device = 0;
  Api api = Api::kUnknown;
  MemoryKind kind = MemoryKind::kDevice;
  uint64_t size = 0;
  uint32_t error = 0;
  uint64_t stack_id = 0;
  uint64_t live_device_bytes = 0;  // of this process when it failed
  bool has_meminfo = false;        // last cudaMemGetInfo sample of that device, if any
  uint64_t meminfo_free = 0;
  uint64_t meminfo_total = 0;
};

class Replay {
 public:
  Replay();
  void alloc(const format::AllocRecord& r);
  void free(const format::FreeRecord& r);
  void failed(const format::AllocFailedRecord& r);
  void meminfo(const format::MemInfoRecord& r);
  void marker(const format::MarkerRecord& r);
  void torch(const format::TorchEventRecord& r);
  void seen_time(uint64_t t) { if (t > last_time_ns_) last_time_ns_ = t; }

  const Summary& summary() const { return summary_; }
  const std::vector<FailureEvent>& failures() const { return failures_; }
  uint64_t last_time_ns() const { return last_time_ns_; }
  uint64_t live_device_bytes() const { return live_device_bytes_; }
  // Everything alive now, in allocation order (ties by address).
  std::vector<LiveAlloc> live() const;

 private:
  // Which table an event's address belongs to: device addresses (device, managed, pool share
  // one: cudaFree frees any of them), pinned host, VMM physical handles, mappings, reservations.
  static uint8_t address_class(MemoryKind kind);
  struct Key {
    uint64_t address;
    uint8_t cls;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept {
      return static_cast<size_t>((k.address ^ (uint64_t{k.cls} << 59)) * 0x9E3779B97F4A7C15ull);
    }
  };
  void remove(std::unordered_map<Key, LiveAlloc, KeyHash>::iterator it);

  std::unordered_map<Key, LiveAlloc, KeyHash> live_;
  std::unordered_map<uint64_t, LiveAlloc> torch_live_;  // tensor blocks by address
  Summary summary_;
  std::vector<FailureEvent> failures_;
  std::unordered_map<int32_t, std::pair<uint64_t, uint64_t>> meminfo_;  // device -> free, total
  uint64_t live_device_bytes_ = 0;
  uint64_t last_time_ns_ = 0;
};

}  // namespace gpumemshim::analyzer

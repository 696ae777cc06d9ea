// Failed allocations, each with what the process held then and the device's last cudaMemGetInfo
// sample.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpumemshim/analyzer/model.h"
#include "gpumemshim/format/records.h"

namespace gpumemshim::analyzer {

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

class FailureLog {
 public:
  void meminfo(const format::MemInfoRecord& r) {
    meminfo_[r.device] = {r.free_bytes, r.total_bytes};
  }
  // An allocation failed while the process held live_device_bytes of device memory.
  const FailureEvent& failed(const format::AllocFailedRecord& r, uint64_t live_device_bytes);
  // In time order.
  const std::vector<FailureEvent>& events() const { return events_; }

 private:
  std::vector<FailureEvent> events_;
  std::unordered_map<int32_t, std::pair<uint64_t, uint64_t>> meminfo_;  // device -> free, total
};

}  // namespace gpumemshim::analyzer

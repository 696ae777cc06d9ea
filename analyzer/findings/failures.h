// Failed allocations, each with what the process held then and the device's last cudaMemGetInfo
// sample.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpumemshim/analyzer/report.h"
#include "replay/model.h"
#include "gpumemshim/format/records.h"

namespace gpumemshim::analyzer {

// A failed allocation as the report lists it, and the raw stack the report symbolizes.
struct FailureEvent : FailedAllocation {
  uint64_t stack_id = 0;
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

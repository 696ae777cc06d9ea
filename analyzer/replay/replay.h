// Replays one process's events. The core keeps the clock, the live set (allocations and tensor
// blocks by address) and the raw sites with their live bytes; as each event passes it feeds the
// trackers of the findings (findings/*.h), which the findings then read.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "findings/categories.h"
#include "findings/devices.h"
#include "findings/failures.h"
#include "findings/growth_sampling.h"
#include "findings/peaks.h"
#include "findings/regions.h"
#include "findings/timeline_tracker.h"
#include "gpumemshim/format/records.h"
#include "replay/model.h"

namespace gpumemshim::analyzer {

class AccountingTracker;  // findings/accounting.h

struct LiveAlloc {
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stack_id = 0;
  uint64_t time_ns = 0;
  int32_t device = 0;
  Api api = Api::kUnknown;
  MemoryKind kind = MemoryKind::kDevice;
  uint64_t step = 0;            // steps seen before the allocation
  bool torch_block = false;     // a tensor block of PyTorch's caching allocator (TorchEvent alloc)
  uint32_t site = 0;            // raw site index (Replay::sites())
  uint32_t region = kNoRegion;  // innermost expect_no_leak region open when it was allocated
  // A tensor block's category: a format::TensorCategory value, 0 when none was told (a temporary).
  uint8_t category = 0;
  // VMM physical memory released while still mapped is its mapping's: stack_id and api are the
  // cuMemMap's, and this the cuMemCreate's stack (0 otherwise).
  uint64_t created_stack_id = 0;
  static constexpr uint32_t kNoRegion = UINT32_MAX;
};

// A raw allocation site: what the replay can tell apart without symbolizing.
struct RawSite {
  uint64_t stack_id = 0;
  Api api = Api::kUnknown;
  MemoryKind kind = MemoryKind::kDevice;
  bool torch_block = false;
  bool operator==(const RawSite&) const = default;
};

class Replay {
 public:
  static constexpr size_t kMaxStepTimes = GrowthSampling::kMaxStepTimes;

  Replay();
  ~Replay();
  Replay(Replay&&) noexcept;
  Replay& operator=(Replay&&) noexcept;

  // The events, in time order.
  void alloc(const format::AllocRecord& r);
  void free(const format::FreeRecord& r);
  void failed(const format::AllocFailedRecord& r);
  void meminfo(const format::MemInfoRecord& r);
  void marker(const format::MarkerRecord& r);
  void torch(const format::TorchEventRecord& r);
  // NVML's view of the device memory (the shim's samples): not a program event, so it moves no
  // clock (findings would otherwise depend on whether NVML was there).
  void process_memory(const format::ProcessMemoryRecord& r);
  // A time seen besides the events' (the End record's).
  void seen_time(uint64_t t);
  // After the last event.
  void finish();
  // Groups of timeline sites, before the first event (TimelineTracker::set_site_groups).
  void set_site_groups(std::vector<uint32_t> group_of);

  // The core's state.
  const Summary& summary() const;
  uint64_t last_time_ns() const;
  uint64_t live_device_bytes() const;
  // Everything alive now, in allocation order (ties by address).
  std::vector<LiveAlloc> live() const;
  const std::vector<RawSite>& sites() const;
  const std::vector<uint64_t>& site_live() const;  // each raw site's live bytes now
  int32_t site_device(uint32_t site) const;        // the device it allocated on (-1: several)
  uint64_t site_peak(uint32_t site) const;         // its own highest live bytes
  // A raw site of device memory (not a tensor block): the sites that make up live device bytes.
  bool is_timeline_site(uint32_t site) const;

  // The trackers, complete once finish() ran.
  const GrowthSampling& growth_samples() const;
  const TimelineTracker& timeline() const;
  const Peaks& peaks() const;
  const DeviceTracker& devices() const;
  const RegionTracker& regions() const;
  const std::vector<FailureEvent>& failures() const;
  const CategoryTracker& categories() const;
  const AccountingTracker& accounting() const;

 private:
  struct Core;  // replay_core.h: the live set's and the sites' cache-line layout
  std::unique_ptr<Core> core_;
};

}  // namespace gpumemshim::analyzer

// Per device: live device bytes, PyTorch's caching allocator (reserved segments, allocated tensor
// blocks, their highs), cudaMemGetInfo samples and OOMs: what fragmentation reports. Fed by the
// replay's core.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "findings/failures.h"
#include "gpumemshim/format/records.h"

namespace gpumemshim::analyzer {

// PyTorch caching-allocator state at one moment (an OOM, or the end of the trace).
struct TorchSnapshot {
  uint64_t time_ns = 0;
  int32_t device = 0;
  uint64_t reserved_bytes = 0;
  uint64_t allocated_bytes = 0;
  uint64_t inactive_split_blocks = 0;  // free ranges inside segments that hold live blocks
  uint64_t inactive_split_bytes = 0;
  uint64_t largest_free_block = 0;  // largest free range inside any segment
};

// An OOM as fragmentation sees it: the torch allocator's, or a failed runtime allocation.
struct OomEvent {
  uint64_t time_ns = 0;
  int32_t device = 0;
  uint64_t requested = 0;
  bool has_device_free = false;
  uint64_t device_free = 0;
  bool torch = false;  // from the caching allocator (reserved/allocated known)
  uint64_t stack_id = 0;
  TorchSnapshot state;  // torch: the allocator's state then
};

// Per device: the caching allocator's reserved/allocated over time and cudaMemGetInfo samples.
struct DeviceMemoryTrack {
  int32_t device = 0;
  bool seen = false;
  uint64_t reserved = 0;
  uint64_t allocated = 0;
  uint64_t reserved_peak = 0;
  uint64_t allocated_at_reserved_peak = 0;
  uint64_t max_reserved_minus_allocated = 0;
  uint64_t live_device_bytes = 0;  // runtime-level, this device
  bool has_meminfo = false;
  uint64_t meminfo_free = 0;
  uint64_t meminfo_total = 0;
  uint64_t untracked_at_meminfo = 0;      // total - free - live_device_bytes at the last sample
  bool torch = false;                     // torch segment/block events seen
  std::map<uint64_t, uint64_t> segments;  // address -> size (segments and mapped ranges)
  TorchSnapshot end;                      // torch: the allocator's state at the end (finish)
};

// Live tensor blocks of one device: (address, size), in any order.
using TorchBlocks = std::vector<std::pair<uint64_t, uint64_t>>;

class DeviceTracker {
 public:
  static constexpr size_t kMaxOoms = 64;

  // Device memory allocated or freed on a device.
  void live_add(int32_t device, uint64_t bytes) {
    if (DeviceMemoryTrack* d = track(device)) d->live_device_bytes += bytes;
  }
  void live_sub(int32_t device, uint64_t bytes) {
    if (DeviceMemoryTrack* d = track(device)) d->live_device_bytes -= bytes;
  }
  void meminfo(const format::MemInfoRecord& r);
  // Tensor blocks' bytes on a device: `add` allocated, `sub` freed.
  void blocks(int32_t device, uint64_t add, uint64_t sub);
  void segment_alloc(const format::TorchEventRecord& r);  // segment alloc or map
  void segment_free(const format::TorchEventRecord& r);   // segment free or unmap
  // An allocation failed: one that ran out of device memory is an OOM of its device.
  void failure(const FailureEvent& f);
  // Whether another OOM is kept (the first kMaxOoms are).
  bool takes_ooms() const { return ooms_.size() < kMaxOoms; }
  // The caching allocator's OOM, with the live tensor blocks of its device.
  void torch_oom(const format::TorchEventRecord& r, const TorchBlocks& blocks);
  // After the last event: the end state of a device with allocator events, from its live blocks.
  void finish(int32_t device, uint64_t time_ns, const TorchBlocks& blocks);

  // Devices that had events, by device number (entries with seen == false are gaps).
  const std::vector<DeviceMemoryTrack>& all() const { return devices_; }
  const std::vector<OomEvent>& ooms() const { return ooms_; }
  uint64_t reserved_bytes() const;  // now, over all devices
  uint64_t allocated_bytes() const;
  // The free ranges inside a device's segments now, given its live tensor blocks.
  TorchSnapshot snapshot(int32_t device, uint64_t time_ns, TorchBlocks blocks) const;

 private:
  // nullptr for implausible device numbers (inline: every device allocation and free asks)
  DeviceMemoryTrack* track(int32_t device) {
    if (static_cast<size_t>(device) < count_) [[likely]] {  // negative ones are huge
      DeviceMemoryTrack& d = devices_[static_cast<size_t>(device)];
      if (d.seen) [[likely]]
        return &d;
    }
    return new_track(device);
  }
  DeviceMemoryTrack* new_track(int32_t device);

  std::vector<DeviceMemoryTrack> devices_;
  size_t count_ = 0;  // devices_.size(), without a division by the track's size per event
  std::vector<OomEvent> ooms_;
};

}  // namespace gpumemshim::analyzer

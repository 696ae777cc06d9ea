#include "findings/devices.h"

#include <algorithm>

namespace gpumemshim::analyzer {

namespace {
constexpr int32_t kMaxDevices = 4096;
constexpr uint32_t kOutOfMemory = 2;  // cudaErrorMemoryAllocation == CUDA_ERROR_OUT_OF_MEMORY
}  // namespace

DeviceMemoryTrack* DeviceTracker::new_track(int32_t device) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  if (static_cast<size_t>(device) >= devices_.size())
    devices_.resize(static_cast<size_t>(device) + 1);
  count_ = devices_.size();
  DeviceMemoryTrack& d = devices_[static_cast<size_t>(device)];
  d.device = device;
  d.seen = true;
  return &d;
}

void DeviceTracker::meminfo(const format::MemInfoRecord& r) {
  DeviceMemoryTrack* d = track(r.device);
  if (!d) return;
  d->has_meminfo = true;
  d->meminfo_free = r.free_bytes;
  d->meminfo_total = r.total_bytes;
  uint64_t used = r.total_bytes > r.free_bytes ? r.total_bytes - r.free_bytes : 0;
  d->untracked_at_meminfo = used > d->live_device_bytes ? used - d->live_device_bytes : 0;
}

void DeviceTracker::blocks(int32_t device, uint64_t add, uint64_t sub) {
  DeviceMemoryTrack* d = track(device);
  if (!d) return;
  d->torch = true;
  d->allocated = d->allocated + add - std::min(sub, d->allocated + add);
  if (d->reserved == d->reserved_peak)  // the blocks that made the peak come after its segment
    d->allocated_at_reserved_peak = std::max(d->allocated_at_reserved_peak, d->allocated);
  if (d->reserved > d->allocated)
    d->max_reserved_minus_allocated =
        std::max(d->max_reserved_minus_allocated, d->reserved - d->allocated);
}

void DeviceTracker::segment_alloc(const format::TorchEventRecord& r) {
  DeviceMemoryTrack* d = track(r.device);
  if (!d) return;
  d->torch = true;
  auto [it, inserted] = d->segments.try_emplace(r.address, r.size);
  if (!inserted) {  // its free was missed
    d->reserved -= std::min(d->reserved, it->second);
    it->second = r.size;
  }
  d->reserved += r.size;
  if (d->reserved > d->reserved_peak) {
    d->reserved_peak = d->reserved;
    d->allocated_at_reserved_peak = d->allocated;
  }
}

void DeviceTracker::segment_free(const format::TorchEventRecord& r) {
  DeviceMemoryTrack* d = track(r.device);
  if (!d) return;
  d->torch = true;
  if (auto it = d->segments.find(r.address); it != d->segments.end()) {
    d->reserved -= std::min(d->reserved, it->second);
    d->segments.erase(it);
  }
  if (d->reserved > d->allocated)
    d->max_reserved_minus_allocated =
        std::max(d->max_reserved_minus_allocated, d->reserved - d->allocated);
}

void DeviceTracker::failure(const FailureEvent& f) {
  if (f.error != kOutOfMemory || !is_device_memory_kind(f.kind) || ooms_.size() >= kMaxOoms) return;
  OomEvent o{.time_ns = f.time_ns,
             .device = f.device,
             .requested = f.size,
             .has_device_free = f.has_meminfo,
             .device_free = f.meminfo_free,
             .stack_id = f.stack_id,
             .state = {}};
  ooms_.push_back(o);
}

void DeviceTracker::torch_oom(const format::TorchEventRecord& r, const TorchBlocks& blocks) {
  if (ooms_.size() >= kMaxOoms) return;
  // The bridge puts the device's free bytes in the address.
  OomEvent o{.time_ns = r.time_ns,
             .device = r.device,
             .requested = r.size,
             .has_device_free = true,
             .device_free = r.address,
             .torch = true,
             .stack_id = r.stack_id,
             .state = snapshot(r.device, r.time_ns, blocks)};
  ooms_.push_back(o);
}

void DeviceTracker::finish(int32_t device, uint64_t time_ns, const TorchBlocks& blocks) {
  if (device >= 0 && static_cast<size_t>(device) < devices_.size())
    devices_[static_cast<size_t>(device)].end = snapshot(device, time_ns, blocks);
}

uint64_t DeviceTracker::reserved_bytes() const {
  uint64_t sum = 0;
  for (const DeviceMemoryTrack& d : devices_) sum += d.reserved;
  return sum;
}

uint64_t DeviceTracker::allocated_bytes() const {
  uint64_t sum = 0;
  for (const DeviceMemoryTrack& d : devices_) sum += d.allocated;
  return sum;
}

// Free ranges inside the segments: the gaps between the live blocks of each segment.
TorchSnapshot DeviceTracker::snapshot(int32_t device, uint64_t time_ns, TorchBlocks blocks) const {
  TorchSnapshot s;
  s.time_ns = time_ns;
  s.device = device;
  if (device < 0 || static_cast<size_t>(device) >= devices_.size()) return s;
  const DeviceMemoryTrack& d = devices_[static_cast<size_t>(device)];
  s.reserved_bytes = d.reserved;
  s.allocated_bytes = d.allocated;
  std::sort(blocks.begin(), blocks.end());
  auto b = blocks.begin();
  for (const auto& [start, size] : d.segments) {
    const uint64_t end = start + size;
    while (b != blocks.end() && b->first < start) ++b;  // blocks outside any known segment
    uint64_t cursor = start, gaps = 0, gap_bytes = 0;
    bool used = false;
    for (; b != blocks.end() && b->first < end; ++b) {
      used = true;
      if (b->first > cursor) {
        ++gaps;
        gap_bytes += b->first - cursor;
        s.largest_free_block = std::max(s.largest_free_block, b->first - cursor);
      }
      cursor = std::max(cursor, std::min(end, b->first + b->second));
    }
    if (cursor < end) {
      ++gaps;
      gap_bytes += end - cursor;
      s.largest_free_block = std::max(s.largest_free_block, end - cursor);
    }
    if (used) {  // a segment without live blocks is one whole inactive block, not a split one
      s.inactive_split_blocks += gaps;
      s.inactive_split_bytes += gap_bytes;
    }
  }
  return s;
}

}  // namespace gpumemshim::analyzer

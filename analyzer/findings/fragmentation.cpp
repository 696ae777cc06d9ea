#include "findings/fragmentation.h"

#include <algorithm>

#include "report/analysis.h"
#include "report/stack_view.h"

namespace gpumemshim::analyzer {

std::vector<DeviceFragmentation> find_fragmentation(const LoadedTrace& trace, StackView& stacks) {
  const DeviceTracker& devices = trace.replay.devices();
  std::vector<DeviceFragmentation> out;
  for (const DeviceMemoryTrack& t : devices.all()) {
    if (!t.seen) continue;
    DeviceFragmentation d;
    d.pid = trace.process.pid;
    d.rank = trace.process.rank;
    d.device = t.device;
    d.torch = t.torch;
    for (const DeviceInfo& info : trace.devices)
      if (info.device == t.device) d.device_total = info.total_bytes;
    if (d.device_total == 0 && t.has_meminfo) d.device_total = t.meminfo_total;
    if (t.has_meminfo) {
      d.has_untracked = true;
      d.untracked = t.untracked_at_meminfo;
    }
    for (const OomEvent& e : devices.ooms()) {
      // With the allocator's events, its own OOM says more than the cudaMalloc that failed under it.
      if (e.device != t.device || e.torch != t.torch) continue;
      OomFinding o;
      o.time_ns = e.time_ns;
      o.requested = e.requested;
      o.torch = e.torch;
      o.has_device_free = e.has_device_free;
      o.device_free = e.device_free;
      if (e.torch) {
        o.reserved = e.state.reserved_bytes;
        o.allocated = e.state.allocated_bytes;
        o.largest_free_block = e.state.largest_free_block;
      }
      const uint64_t cache_free = o.reserved > o.allocated ? o.reserved - o.allocated : 0;
      o.enough_total_free = (o.torch && cache_free >= o.requested) ||
                            (o.has_device_free && o.device_free >= o.requested);
      o.stack = stacks.frames(e.stack_id);
      d.ooms.push_back(std::move(o));
    }
    if (t.torch) {
      d.reserved_peak = t.reserved_peak;
      d.allocated_at_reserved_peak = t.allocated_at_reserved_peak;
      d.max_reserved_minus_allocated = t.max_reserved_minus_allocated;
      d.reserved_end = t.reserved;
      d.allocated_end = t.allocated;
      const OomEvent* first = nullptr;
      for (const OomEvent& e : devices.ooms())
        if (e.torch && e.device == t.device && !first) first = &e;
      const TorchSnapshot& s = first ? first->state : t.end;
      d.snapshot = first ? "oom" : "end";
      d.inactive_split_blocks = s.inactive_split_blocks;
      d.inactive_split_bytes = s.inactive_split_bytes;
      d.largest_free_block = s.largest_free_block;
    }
    if (!t.torch && !t.has_meminfo && d.ooms.empty()) continue;  // nothing to say about it
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace gpumemshim::analyzer

#include "findings/fragmentation.h"

#include <fmt/format.h>

#include <algorithm>

#include "findings/memory_limit.h"
#include "gpumemshim/analyzer/units.h"
#include "report/analysis.h"
#include "report/stack_view.h"

namespace gpumemshim::analyzer {

namespace {

std::string cap_text(const OomFinding& o, uint64_t device_total) {
  if (o.memory_fraction > 0)
    return fmt::format("the process's memory-fraction cap of {:.3g}% ({}{})",
                       o.memory_fraction * 100, human_bytes(o.limit_bytes),
                       device_total ? " of " + human_bytes(device_total) : std::string());
  return fmt::format("the process's memory cap of {}", human_bytes(o.limit_bytes));
}

// The segment PyTorch's caching allocator asks the device for to serve a request (its
// get_allocation_size: small requests share a small segment, medium ones a large buffer, large ones
// get their own, rounded up). The memory-fraction cap refuses the segment, not the request.
uint64_t segment_for(uint64_t requested) {
  constexpr uint64_t kMiB = 1ull << 20;
  if (requested <= kMiB) return 2 * kMiB;
  if (requested < 10 * kMiB) return 20 * kMiB;
  return (requested + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);
}

// What stopped an OOM, from the numbers the trace has: the cache's free bytes and largest free
// block (the allocator's state then), the process's own cap, the device's free bytes.
void judge(OomFinding& o, const MemoryLimit& limit) {
  const uint64_t cache_free = o.reserved > o.allocated ? o.reserved - o.allocated : 0;
  const bool fits_in_cache = o.torch && cache_free >= o.requested;
  // The caching allocator's cap holds whatever the device has free: only it can refuse its own
  // growth this way.
  const bool capped = o.torch && limit.known();
  if (capped) {
    o.limit_bytes = limit.bytes;
    o.memory_fraction = limit.fraction;
  }
  uint64_t room = o.has_device_free ? o.device_free : 0;
  if (capped) {
    const uint64_t under_cap = limit.bytes > o.reserved ? limit.bytes - o.reserved : 0;
    room = o.has_device_free ? std::min(room, under_cap) : under_cap;
  }
  o.enough_total_free = fits_in_cache || ((o.has_device_free || capped) && room >= o.requested);
  const std::string asked = human_bytes(o.requested);
  const std::string cache = o.torch ? fmt::format("reserved {}, {} free in the cache",
                                                  human_bytes(o.reserved), human_bytes(cache_free))
                                    : std::string();
  if (fits_in_cache && o.largest_free_block < o.requested) {
    o.cause = "fragmentation";
    o.verdict = fmt::format(
        "{} free in the cache would have held the {} asked, but its largest free "
        "block was {}: fragmentation",
        human_bytes(cache_free), asked, human_bytes(o.largest_free_block));
  } else if (capped && o.reserved + segment_for(o.requested) > limit.bytes) {
    o.cause = "memory_limit";
    o.verdict =
        fmt::format("{} was reached: {}, {} asked", cap_text(o, limit.device_total), cache, asked);
    if (o.has_device_free)
      o.verdict += fmt::format(" (the device had {} free)", human_bytes(o.device_free));
  } else if (o.has_device_free && o.device_free < o.requested) {
    o.cause = "device_full";
    o.verdict = fmt::format("the device had {} free, less than the {} asked{}",
                            human_bytes(o.device_free), asked, cache.empty() ? "" : ": " + cache);
  } else if (o.has_device_free) {
    o.cause = "unexplained";
    o.verdict = fmt::format(
        "the device had {} free{}{}, enough for the {} asked: a limit the trace does "
        "not show, or another process took the memory first",
        human_bytes(o.device_free), capped ? " within " + cap_text(o, limit.device_total) : "",
        cache.empty() ? "" : " (" + cache + ")", asked);
  } else {
    o.cause = "unknown";
    o.verdict = fmt::format("{} asked; no free-memory figure was recorded{}", asked,
                            cache.empty() ? "" : " (" + cache + ")");
  }
}

}  // namespace

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
    const MemoryLimit limit = memory_limit(trace.attributes, t.device, d.device_total);
    if (t.torch) {
      d.limit_bytes = limit.bytes;
      d.memory_fraction = limit.fraction;
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
      judge(o, limit);
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

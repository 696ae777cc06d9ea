#include "gpumemshim/analyzer/replay.h"

#include <algorithm>

namespace gpumemshim::analyzer {

Replay::Replay() { live_.reserve(1024); }

uint8_t Replay::address_class(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kDevice:
    case MemoryKind::kManaged:
    case MemoryKind::kPool:
      return 0;
    case MemoryKind::kPinnedHost: return 1;
    case MemoryKind::kPhysical: return 2;
    case MemoryKind::kMapping: return 3;
    case MemoryKind::kReservation: return 4;
  }
  return 5;
}

void Replay::alloc(const format::AllocRecord& r) {
  seen_time(r.time_ns);
  ++summary_.allocations;
  Key key{r.address, address_class(r.kind)};
  // A live address allocated again: we missed its free; the new allocation replaces the old one.
  if (auto old = live_.find(key); old != live_.end()) remove(old);
  LiveAlloc& a = live_[key];
  a = LiveAlloc{r.address, r.size, r.stack_id, r.time_ns, r.device, r.api, r.kind, summary_.steps};
  KindCounters& k = summary_.by_kind[static_cast<uint8_t>(r.kind)];
  ++k.allocations;
  ++k.live_count;
  k.live_bytes += r.size;
  k.peak_bytes = std::max(k.peak_bytes, k.live_bytes);
  if (is_device_memory_kind(r.kind)) {
    live_device_bytes_ += r.size;
    summary_.peak_bytes = std::max(summary_.peak_bytes, live_device_bytes_);
  }
}

void Replay::remove(std::unordered_map<Key, LiveAlloc, KeyHash>::iterator it) {
  const LiveAlloc& a = it->second;
  KindCounters& k = summary_.by_kind[static_cast<uint8_t>(a.kind)];
  --k.live_count;
  k.live_bytes -= a.size;
  if (is_device_memory_kind(a.kind)) live_device_bytes_ -= a.size;
  live_.erase(it);
}

void Replay::free(const format::FreeRecord& r) {
  seen_time(r.time_ns);
  if (r.address == 0) return;  // cudaFree(nullptr): a no-op (often used to create the context)
  if (r.result != 0) {
    ++summary_.failed_frees;
    return;
  }
  auto it = live_.find(Key{r.address, address_class(r.kind)});
  if (it == live_.end()) {
    ++summary_.unmatched_frees;
    return;
  }
  ++summary_.frees;
  ++summary_.by_kind[static_cast<uint8_t>(it->second.kind)].frees;
  remove(it);
}

void Replay::failed(const format::AllocFailedRecord& r) {
  seen_time(r.time_ns);
  ++summary_.failed_allocations;
  FailureEvent f;
  f.time_ns = r.time_ns;
  f.thread_id = r.thread_id;
  f.device = r.device;
  f.api = r.api;
  f.kind = r.kind;
  f.size = r.size;
  f.error = r.error;
  f.stack_id = r.stack_id;
  f.live_device_bytes = live_device_bytes_;
  if (auto m = meminfo_.find(r.device); m != meminfo_.end()) {
    f.has_meminfo = true;
    f.meminfo_free = m->second.first;
    f.meminfo_total = m->second.second;
  }
  failures_.push_back(f);
}

void Replay::meminfo(const format::MemInfoRecord& r) {
  seen_time(r.time_ns);
  meminfo_[r.device] = {r.free_bytes, r.total_bytes};
}

void Replay::marker(const format::MarkerRecord& r) {
  seen_time(r.time_ns);
  ++summary_.markers;
  if (r.kind == format::MarkerKind::kStep) ++summary_.steps;
}

// Tensor blocks live in the allocator's segments: they are counted on their own, never in the
// device-memory counters (the segments are, through the runtime hooks).
void Replay::torch(const format::TorchEventRecord& r) {
  seen_time(r.time_ns);
  TorchCounters& t = summary_.torch;
  ++t.events;
  switch (r.action) {
    case format::TorchAction::kAlloc: {
      ++t.allocs;
      auto [it, inserted] = torch_live_.try_emplace(r.address);
      if (!inserted) {  // its free was missed: the new block replaces it
        --t.live_blocks;
        t.live_block_bytes -= it->second.size;
      }
      LiveAlloc& a = it->second;
      a = LiveAlloc{r.address, r.size, r.stack_id, r.time_ns, r.device, Api::kUnknown,
                    MemoryKind::kDevice, summary_.steps, true};
      ++t.live_blocks;
      t.live_block_bytes += r.size;
      break;
    }
    case format::TorchAction::kFreeCompleted: {
      ++t.frees;
      if (auto it = torch_live_.find(r.address); it != torch_live_.end()) {
        --t.live_blocks;
        t.live_block_bytes -= it->second.size;
        torch_live_.erase(it);
      }
      break;
    }
    case format::TorchAction::kSegmentAlloc: ++t.segment_allocs; break;
    case format::TorchAction::kSegmentFree: ++t.segment_frees; break;
    case format::TorchAction::kOom: ++t.ooms; break;
    default: break;  // free_requested, map/unmap; later actions are ignored
  }
}

std::vector<LiveAlloc> Replay::live() const {
  std::vector<LiveAlloc> out;
  out.reserve(live_.size() + torch_live_.size());
  for (const auto& [key, a] : live_) out.push_back(a);
  for (const auto& [address, a] : torch_live_) out.push_back(a);
  std::sort(out.begin(), out.end(), [](const LiveAlloc& x, const LiveAlloc& y) {
    if (x.time_ns != y.time_ns) return x.time_ns < y.time_ns;
    if (x.torch_block != y.torch_block) return y.torch_block;
    if (x.kind != y.kind) return x.kind < y.kind;
    return x.address < y.address;
  });
  return out;
}

}  // namespace gpumemshim::analyzer

#include "replay/replay.h"

#include <algorithm>

namespace gpumemshim::analyzer {

namespace {
constexpr std::string_view kRegionPrefix = "expect_no_leak:";
constexpr int32_t kMaxDevices = 4096;
constexpr size_t kMaxOoms = 64;
constexpr uint32_t kOutOfMemory = 2;  // cudaErrorMemoryAllocation == CUDA_ERROR_OUT_OF_MEMORY
}  // namespace

Replay::Replay() : next_kept_ns_(time_sampler_.stride() * kTimeTickNs) {}

DeviceMemoryTrack* Replay::new_device_track(int32_t device) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  if (static_cast<size_t>(device) >= devices_.size())
    devices_.resize(static_cast<size_t>(device) + 1);
  device_count_ = devices_.size();
  DeviceMemoryTrack& d = devices_[static_cast<size_t>(device)];
  d.device = device;
  d.seen = true;
  return &d;
}

inline uint32_t Replay::site_of(const RawSite& s, int32_t device) {
  const uint32_t tag = site_tag(s);
  const size_t mask = site_slots_.size() - 1;
  uint32_t site;
  for (size_t i = site_slot_home(s.stack_id, tag);; i = (i + 1) & mask) {
    const SiteSlot& slot = site_slots_[i];
    if (slot.stack_id == s.stack_id && slot.tag == tag) [[likely]] {
      site = slot.site;
      break;
    }
    if (slot.tag == 0) {
      site = add_site(s, device);
      break;
    }
  }
  SiteHot& hot = site_hot_[site];  // the line site_add reads next
  if (hot.device != device) hot.device = -1;
  return site;
}

uint32_t Replay::add_site(const RawSite& s, int32_t device) {
  const auto site = static_cast<uint32_t>(sites_.size());
  sites_.push_back(s);
  SiteHot hot;
  hot.traits = static_cast<uint8_t>(static_cast<uint8_t>(s.kind) |
                                    (is_device_memory_kind(s.kind) ? kDeviceMemoryTrait : 0) |
                                    (is_timeline_site(site) ? kTimelineTrait : 0));
  hot.device = device;
  if (site < group_of_.size()) hot.group = group_of_[site];
  site_hot_.push_back(hot);
  site_live_.push_back(0);
  timeline_.sites(sites_.size());
  if (2 * sites_.size() > site_slots_.size()) grow_site_slots();
  place_site_slot(SiteSlot{s.stack_id, site_tag(s), site});
  return site;
}

void Replay::place_site_slot(const SiteSlot& slot) {
  const size_t mask = site_slots_.size() - 1;
  size_t i = site_slot_home(slot.stack_id, slot.tag);
  while (site_slots_[i].tag != 0) i = (i + 1) & mask;
  site_slots_[i] = slot;
}

void Replay::grow_site_slots() {
  std::vector<SiteSlot> old = std::move(site_slots_);
  site_slots_.assign(old.size() * 2, SiteSlot{});
  --site_slot_shift_;
  for (const SiteSlot& slot : old)
    if (slot.tag != 0) place_site_slot(slot);
}

void Replay::site_seen(uint32_t site, SiteHot& hot) {
  step_sampler_.touch(site);
  time_sampler_.touch(site);
  hot.stamp = stamp_;
}

inline void Replay::site_add(uint32_t site, uint64_t bytes) {
  peak_sites_.before_change(site, site_live_);
  SiteHot& hot = site_hot_[site];
  if (touching_ && hot.stamp != stamp_) site_seen(site, hot);
  ++site_changes_;
  uint64_t now = site_live_[site] += bytes;
  hot.peak = std::max(hot.peak, now);
  if (hot.traits & kTimelineTrait) {
    timeline_.site_changed(site, now);
    log_site_change(site, static_cast<int64_t>(bytes));
  }
  if (hot.group != UINT32_MAX) groups_.change(hot.group, bytes);
}

inline void Replay::site_sub(const LiveRecord& a) {
  const uint32_t site = a.site;
  const uint64_t bytes = a.size;
  peak_sites_.before_change(site, site_live_);
  if (touching_) {
    SiteHot& hot = site_hot_[site];
    if (hot.stamp != stamp_) site_seen(site, hot);
  }
  ++site_changes_;
  uint64_t now = site_live_[site] -= bytes;
  if (a.traits & kTimelineTrait) {
    timeline_.site_changed(site, now);
    log_site_change(site, -static_cast<int64_t>(bytes));
  }
  if (!groups_.live.empty()) [[unlikely]]
    if (const uint32_t group = site_hot_[site].group; group != UINT32_MAX)
      groups_.change(group, uint64_t{0} - bytes);
}

Replay::GroupSums::GroupSums(const std::vector<uint32_t>& group_of) {
  uint32_t groups = 0;
  for (uint32_t g : group_of)
    if (g != UINT32_MAX) groups = std::max(groups, g + 1);
  live.assign(groups, 0);
  peak.assign(groups, 0);
}

void Replay::set_site_groups(std::vector<uint32_t> group_of) {
  groups_ = GroupSums(group_of);
  group_of_ = std::move(group_of);
  for (size_t i = 0; i < site_hot_.size(); ++i)
    site_hot_[i].group = i < group_of_.size() ? group_of_[i] : UINT32_MAX;
}

std::vector<uint64_t> Replay::group_peaks_from_log(const std::vector<uint32_t>& group_of) const {
  GroupSums sums(group_of);
  for (const uint64_t change : site_log_) {
    const auto site = static_cast<uint32_t>(change >> kDeltaBits);
    const int64_t delta = static_cast<int64_t>(change << (64 - kDeltaBits)) >> (64 - kDeltaBits);
    if (site < group_of.size() && group_of[site] != UINT32_MAX)
      sums.change(group_of[site], static_cast<uint64_t>(delta));
  }
  return sums.peak;
}

uint64_t Replay::torch_reserved_bytes() const {
  uint64_t sum = 0;
  for (const DeviceMemoryTrack& d : devices_) sum += d.reserved;
  return sum;
}

uint64_t Replay::torch_allocated_bytes() const {
  uint64_t sum = 0;
  for (const DeviceMemoryTrack& d : devices_) sum += d.allocated;
  return sum;
}

// The state before this event is the state at the end of every bucket since the last event. The
// sampler keeps one value per `stride` buckets (the last one written wins), so only a boundary
// whose kept bucket the next one would not write again is written: one call per kept bucket
// instead of one per microsecond of the trace, and per event one comparison with the time it
// takes.
void Replay::tick(uint64_t time_ns) {
  time_sampler_.boundary(last_event_ns_ / kTimeTickNs + 1, site_live_, site_changes_);
  new_stamp();
  const uint64_t k = time_sampler_.stride();  // it may have grown
  next_kept_ns_ = (time_ns / kTimeTickNs / k + 1) * k * kTimeTickNs;
}

// The sampler keeps every stride()-th step boundary, and of the boundaries between two kept ones
// the last one's values hold. While it compares every site at a boundary (no touches), a boundary
// the next kept one will overwrite costs a copy of the sites' bytes instead (a comparison and a log
// entry per changed site: most of them, in a busy training step), kept in case no step follows.
// The samples are the same either way; while it takes touches, a boundary costs only the sites
// changed and is given at once.
void Replay::step_boundary() {
  const uint64_t index = summary_.steps;
  if (!step_sampler_.wants_touches() && index % step_sampler_.stride() != 0) {
    pending_step_live_.assign(site_live_.begin(), site_live_.end());
    pending_step_ = index;
    pending_step_changes_ = site_changes_;
    return;
  }
  pending_step_ = 0;
  step_sampler_.boundary(index, site_live_, site_changes_);
  new_stamp();
}

void Replay::finish() {
  timeline_.finish();
  if (pending_step_ != 0)
    step_sampler_.boundary(pending_step_, pending_step_live_, pending_step_changes_);
  pending_step_ = 0;
}

SiteSampler Replay::time_samples_closed() const {
  SiteSampler s = time_sampler_;
  s.boundary(last_time_bucket(), site_live_, site_changes_);
  return s;
}

void Replay::alloc(const format::AllocRecord& r) {
  at(r.time_ns);
  ++summary_.allocations;
  auto [slot, inserted] = live_[address_class(r.kind)].try_emplace(r.address);
  // A live address allocated again: we missed its free; the new allocation replaces the old one.
  if (!inserted) forget(*slot);
  const uint32_t site = site_of(RawSite{r.stack_id, r.api, r.kind, false}, r.device);
  *slot = new_record(site, r.size, r.time_ns, r.device);
  site_add(site, r.size);
  KindCounters& k = summary_.by_kind[static_cast<uint8_t>(r.kind)];
  ++k.allocations;
  ++k.live_count;
  k.live_bytes += r.size;
  k.peak_bytes = std::max(k.peak_bytes, k.live_bytes);
  if (is_device_memory_kind(r.kind)) {
    live_device_bytes_ += r.size;
    in_step_ += r.size;
    if (live_device_bytes_ > summary_.peak_bytes) {
      peak_sites_.new_peak();  // ranks: sites at the peak
      peak_in_step_ = in_step_;
      peak_time_ns_ = r.time_ns;
    }
    summary_.peak_bytes = std::max(summary_.peak_bytes, live_device_bytes_);
    if (DeviceMemoryTrack* d = device_track(r.device)) d->live_device_bytes += r.size;
    timeline_point(r.time_ns);
  }
}

inline void Replay::forget(const LiveRecord& a) {
  KindCounters& k = summary_.by_kind[a.traits & kKindBits];
  --k.live_count;
  k.live_bytes -= a.size;
  site_sub(a);
  if (a.traits & kDeviceMemoryTrait) {
    live_device_bytes_ -= a.size;
    if (in_this_step(a)) in_step_ -= std::min(in_step_, a.size);
    if (DeviceMemoryTrack* d = device_track(a.device)) d->live_device_bytes -= a.size;
  }
}

void Replay::free(const format::FreeRecord& r) {
  at(r.time_ns);
  if (r.address == 0) return;  // cudaFree(nullptr): a no-op (often used to create the context)
  if (r.result != 0) {
    ++summary_.failed_frees;
    return;
  }
  LiveRecords& table = live_[address_class(r.kind)];
  const size_t slot = table.find_slot(r.address);
  if (slot == table.kNone) {
    ++summary_.unmatched_frees;
    return;
  }
  const LiveRecord& a = table.at_slot(slot);
  ++summary_.frees;
  ++summary_.by_kind[a.traits & kKindBits].frees;
  const bool device = a.traits & kDeviceMemoryTrait;
  forget(a);
  table.erase_slot(slot);  // last: a is the table's record
  if (device) timeline_point(r.time_ns);
}

void Replay::failed(const format::AllocFailedRecord& r) {
  at(r.time_ns);
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
  if (r.error == kOutOfMemory && is_device_memory_kind(r.kind) && ooms_.size() < kMaxOoms) {
    OomEvent o;
    o.time_ns = r.time_ns;
    o.device = r.device;
    o.requested = r.size;
    o.has_device_free = f.has_meminfo;
    o.device_free = f.meminfo_free;
    o.stack_id = r.stack_id;
    ooms_.push_back(o);
  }
}

void Replay::meminfo(const format::MemInfoRecord& r) {
  at(r.time_ns);
  meminfo_[r.device] = {r.free_bytes, r.total_bytes};
  if (DeviceMemoryTrack* d = device_track(r.device)) {
    d->has_meminfo = true;
    d->meminfo_free = r.free_bytes;
    d->meminfo_total = r.total_bytes;
    uint64_t used = r.total_bytes > r.free_bytes ? r.total_bytes - r.free_bytes : 0;
    d->untracked_at_meminfo = used > d->live_device_bytes ? used - d->live_device_bytes : 0;
  }
}

void Replay::marker(const format::MarkerRecord& r) {
  at(r.time_ns);
  ++summary_.markers;
  switch (r.kind) {
    case format::MarkerKind::kStep:
      ++summary_.steps;
      if (step_times_.size() < kMaxStepTimes) step_times_.push_back(r.time_ns);
      in_step_ = torch_in_step_ = 0;  // what is live now was made in earlier steps
      step_boundary();
      break;
    case format::MarkerKind::kRangePush:
      if (r.name.starts_with(kRegionPrefix) && regions_.size() < kMaxRegions) {
        open_regions_.push_back(static_cast<uint32_t>(regions_.size()));
        regions_.push_back(Region{std::string(r.name.substr(kRegionPrefix.size())), r.thread_id,
                                  r.time_ns, UINT64_MAX});
      }
      break;
    case format::MarkerKind::kRangePop:
      // The region API names its pops; close the innermost open region of that name, preferring
      // the same thread. Unnamed pops (NVTX) never close a region.
      if (r.name.starts_with(kRegionPrefix)) {
        std::string_view name = r.name.substr(kRegionPrefix.size());
        auto pick = open_regions_.rend();
        for (auto it = open_regions_.rbegin(); it != open_regions_.rend(); ++it) {
          const Region& g = regions_[*it];
          if (g.name != name) continue;
          if (g.thread_id == r.thread_id) {
            pick = it;
            break;
          }
          if (pick == open_regions_.rend()) pick = it;
        }
        if (pick != open_regions_.rend()) {
          regions_[*pick].end_ns = r.time_ns;
          open_regions_.erase(std::next(pick).base());
        }
      }
      break;
    default:
      break;
  }
}

void Replay::torch_allocated(int32_t device, uint64_t add, uint64_t sub) {
  DeviceMemoryTrack* d = device_track(device);
  if (!d) return;
  d->torch = true;
  d->allocated = d->allocated + add - std::min(sub, d->allocated + add);
  if (d->reserved == d->reserved_peak)  // the blocks that made the peak come after its segment
    d->allocated_at_reserved_peak = std::max(d->allocated_at_reserved_peak, d->allocated);
  if (d->reserved > d->allocated)
    d->max_reserved_minus_allocated =
        std::max(d->max_reserved_minus_allocated, d->reserved - d->allocated);
}

// Tensor blocks live in the allocator's segments: they are counted on their own, never in the
// device-memory counters (the segments are, through the runtime hooks).
void Replay::torch(const format::TorchEventRecord& r) {
  at(r.time_ns);
  TorchCounters& t = summary_.torch;
  ++t.events;
  switch (r.action) {
    case format::TorchAction::kAlloc: {
      ++t.allocs;
      auto [slot, inserted] = torch_live_.try_emplace(r.address);
      LiveRecord& a = *slot;
      if (!inserted) {  // its free was missed: the new block replaces it
        --t.live_blocks;
        t.live_block_bytes -= a.size;
        site_sub(a);
        torch_allocated(a.device, 0, a.size);
      }
      const uint32_t site =
          site_of(RawSite{r.stack_id, Api::kUnknown, MemoryKind::kDevice, true}, r.device);
      a = new_record(site, r.size, r.time_ns, r.device);
      site_add(site, r.size);
      torch_allocated(r.device, r.size, 0);
      ++t.live_blocks;
      t.live_block_bytes += r.size;
      torch_in_step_ += r.size;
      if (t.live_block_bytes > torch_peak_) {
        torch_peak_ = t.live_block_bytes;
        torch_peak_in_step_ = torch_in_step_;
        torch_peak_time_ns_ = r.time_ns;
      }
      break;
    }
    case format::TorchAction::kFreeCompleted: {
      ++t.frees;
      if (const size_t slot = torch_live_.find_slot(r.address); slot != torch_live_.kNone) {
        const LiveRecord& a = torch_live_.at_slot(slot);
        --t.live_blocks;
        t.live_block_bytes -= a.size;
        site_sub(a);
        torch_allocated(a.device, 0, a.size);
        if (in_this_step(a)) torch_in_step_ -= std::min(torch_in_step_, a.size);
        torch_live_.erase_slot(slot);  // last: a is the table's record
      }
      break;
    }
    case format::TorchAction::kSegmentAlloc:
    case format::TorchAction::kSegmentMap: {
      if (r.action == format::TorchAction::kSegmentAlloc) ++t.segment_allocs;
      DeviceMemoryTrack* d = device_track(r.device);
      if (!d) break;
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
      break;
    }
    case format::TorchAction::kSegmentFree:
    case format::TorchAction::kSegmentUnmap: {
      if (r.action == format::TorchAction::kSegmentFree) ++t.segment_frees;
      DeviceMemoryTrack* d = device_track(r.device);
      if (!d) break;
      d->torch = true;
      if (auto it = d->segments.find(r.address); it != d->segments.end()) {
        d->reserved -= std::min(d->reserved, it->second);
        d->segments.erase(it);
      }
      if (d->reserved > d->allocated)
        d->max_reserved_minus_allocated =
            std::max(d->max_reserved_minus_allocated, d->reserved - d->allocated);
      break;
    }
    case format::TorchAction::kOom: {
      ++t.ooms;
      if (ooms_.size() >= kMaxOoms) break;
      OomEvent o;
      o.time_ns = r.time_ns;
      o.device = r.device;
      o.requested = r.size;
      o.has_device_free = true;
      o.device_free = r.address;  // the bridge puts the device's free bytes there
      o.torch = true;
      o.stack_id = r.stack_id;
      o.state = snapshot(r.device, r.time_ns);
      ooms_.push_back(o);
      break;
    }
    default:
      return;  // free_requested; later actions are ignored
  }
  if (r.action != format::TorchAction::kOom) timeline_point(r.time_ns);
}

// Free ranges inside the segments: the gaps between the live blocks of each segment.
TorchSnapshot Replay::snapshot(int32_t device, uint64_t time_ns) const {
  TorchSnapshot s;
  s.time_ns = time_ns;
  s.device = device;
  if (device < 0 || static_cast<size_t>(device) >= devices_.size()) return s;
  const DeviceMemoryTrack& d = devices_[static_cast<size_t>(device)];
  s.reserved_bytes = d.reserved;
  s.allocated_bytes = d.allocated;
  std::vector<std::pair<uint64_t, uint64_t>> blocks;
  torch_live_.for_each([&](uint64_t address, const LiveRecord& a) {
    if (a.device == device) blocks.emplace_back(address, a.size);
  });
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

LiveAlloc Replay::expand(uint64_t address, const LiveRecord& a) const {
  const RawSite& s = sites_[a.site];
  const uint32_t region = a.region == kNoLiveRegion ? LiveAlloc::kNoRegion : a.region;
  return LiveAlloc{address, a.size,     s.stack_id,    a.time_ns, a.device, s.api,
                   s.kind,  step_of(a), s.torch_block, a.site,    region};
}

std::vector<LiveAlloc> Replay::live() const {
  std::vector<LiveAlloc> out;
  size_t n = torch_live_.size();
  for (const auto& table : live_) n += table.size();
  out.reserve(n);
  auto add = [&](uint64_t address, const LiveRecord& a) { out.push_back(expand(address, a)); };
  for (const auto& table : live_) table.for_each(add);
  torch_live_.for_each(add);
  std::sort(out.begin(), out.end(), [](const LiveAlloc& x, const LiveAlloc& y) {
    if (x.time_ns != y.time_ns) return x.time_ns < y.time_ns;
    if (x.torch_block != y.torch_block) return y.torch_block;
    if (x.kind != y.kind) return x.kind < y.kind;
    return x.address < y.address;
  });
  return out;
}

}  // namespace gpumemshim::analyzer

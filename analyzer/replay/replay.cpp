#include "replay/replay.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "findings/backward_attribution.h"
#include "replay/replay_core.h"

namespace gpumemshim::analyzer {

namespace {
constexpr uint32_t kOutOfMemory = 2;  // cudaErrorMemoryAllocation == CUDA_ERROR_OUT_OF_MEMORY
}  // namespace

// ---- Raw sites ----

inline uint32_t Replay::Core::site_of(const RawSite& s, int32_t device) {
  const uint32_t tag = site_tag(s);
  const size_t mask = site_slots.size() - 1;
  uint32_t site;
  for (size_t i = site_slot_home(s.stack_id, tag);; i = (i + 1) & mask) {
    const SiteSlot& slot = site_slots[i];
    if (slot.stack_id == s.stack_id && slot.tag == tag) [[likely]] {
      site = slot.site;
      break;
    }
    if (slot.tag == 0) {
      site = add_site(s, device);
      break;
    }
  }
  SiteHot& hot = site_hot[site];  // the line site_add reads next
  if (hot.device != device) hot.device = -1;
  return site;
}

uint32_t Replay::Core::add_site(const RawSite& s, int32_t device) {
  const auto site = static_cast<uint32_t>(sites.size());
  sites.push_back(s);
  SiteHot hot;
  hot.traits = static_cast<uint8_t>(static_cast<uint8_t>(s.kind) |
                                    (is_device_memory_kind(s.kind) ? kDeviceMemoryTrait : 0) |
                                    (is_timeline_site(site) ? kTimelineTrait : 0));
  hot.device = device;
  hot.group = timeline.group_of(site);
  site_hot.push_back(hot);
  site_live.push_back(0);
  timeline.sites(sites.size());
  if (2 * sites.size() > site_slots.size()) grow_site_slots();
  place_site_slot(SiteSlot{s.stack_id, site_tag(s), site});
  return site;
}

void Replay::Core::place_site_slot(const SiteSlot& slot) {
  const size_t mask = site_slots.size() - 1;
  size_t i = site_slot_home(slot.stack_id, slot.tag);
  while (site_slots[i].tag != 0) i = (i + 1) & mask;
  site_slots[i] = slot;
}

void Replay::Core::grow_site_slots() {
  std::vector<SiteSlot> old = std::move(site_slots);
  site_slots.assign(old.size() * 2, SiteSlot{});
  --site_slot_shift;
  for (const SiteSlot& slot : old)
    if (slot.tag != 0) place_site_slot(slot);
}

inline AllocationWindows::Tag Replay::Core::site_add(uint32_t site, uint64_t bytes) {
  peaks.before_change(site, site_live);
  SiteHot& hot = site_hot[site];
  if (growth.wants_touch(hot.stamp)) hot.stamp = growth.touch(site);
  growth.changed();
  uint64_t now = site_live[site] += bytes;
  hot.peak = std::max(hot.peak, now);
  if (hot.traits & kTimelineTrait) timeline.site_changed(site, now, static_cast<int64_t>(bytes));
  if (hot.group != TimelineTracker::kNoGroup) timeline.group_changed(hot.group, bytes);
  return growth.allocated(site, bytes);
}

inline void Replay::Core::site_sub(const LiveRecord& a) {
  const uint32_t site = a.site;
  const uint64_t bytes = a.size;
  peaks.before_change(site, site_live);
  if (SiteHot& hot = site_hot[site]; growth.wants_touch(hot.stamp)) hot.stamp = growth.touch(site);
  growth.changed();
  growth.freed(site, bytes, a.window);
  uint64_t now = site_live[site] -= bytes;
  if (a.traits & kTimelineTrait) timeline.site_changed(site, now, -static_cast<int64_t>(bytes));
  if (timeline.grouping()) [[unlikely]]
    if (const uint32_t group = site_hot[site].group; group != TimelineTracker::kNoGroup)
      timeline.group_changed(group, uint64_t{0} - bytes);
}

// ---- The live set ----

inline void Replay::Core::forget(const LiveRecord& a) {
  KindCounters& k = summary.by_kind[a.traits & kKindBits];
  --k.live_count;
  k.live_bytes -= a.size;
  site_sub(a);
  if (a.traits & kDeviceMemoryTrait) {
    live_device_bytes -= a.size;
    peaks.device_free(a.size, in_this_step(a));
    devices.live_sub(a.device, a.size);
  }
}

TorchBlocks Replay::Core::torch_blocks(int32_t device) const {
  TorchBlocks blocks;
  torch_live.for_each([&](uint64_t address, const LiveRecord& a) {
    if (a.device == device) blocks.emplace_back(address, a.size);
  });
  return blocks;
}

LiveAlloc Replay::Core::expand(uint64_t address, const LiveRecord& a) const {
  const RawSite& s = sites[a.site];
  const uint32_t region = a.region == RegionTracker::kNone ? LiveAlloc::kNoRegion : a.region;
  return LiveAlloc{address, a.size,     s.stack_id,    a.time_ns, a.device, s.api,
                   s.kind,  step_of(a), s.torch_block, a.site,    region};
}

// ---- Dispatch ----

inline void Replay::Core::alloc(const format::AllocRecord& r) {
  at(r.time_ns);
  growth.thread(r.thread_id);
  ++summary.allocations;
  auto [slot, inserted] = live[address_class(r.kind)].try_emplace(r.address);
  // A live address allocated again: we missed its free; the new allocation replaces the old one.
  if (!inserted) forget(*slot);
  const uint32_t site = site_of(RawSite{r.stack_id, r.api, r.kind, false}, r.device);
  *slot = new_record(site, r.size, r.time_ns, r.device);
  slot->window = site_add(site, r.size);
  KindCounters& k = summary.by_kind[static_cast<uint8_t>(r.kind)];
  ++k.allocations;
  ++k.live_count;
  k.live_bytes += r.size;
  k.peak_bytes = std::max(k.peak_bytes, k.live_bytes);
  if (is_device_memory_kind(r.kind)) {
    live_device_bytes += r.size;
    if (peaks.device_alloc(r.size, live_device_bytes, r.time_ns))  // ranks: sites at the peak
      summary.peak_bytes = live_device_bytes;
    devices.live_add(r.device, r.size);
    categories.point(r.time_ns, live_device_bytes, devices);
    timeline_point(r.time_ns);
  }
  if (r.kind == MemoryKind::kMapping || (!inserted && r.kind == MemoryKind::kPhysical)) [[unlikely]]
    vmm_alloc(r, !inserted);
}

inline void Replay::Core::free(const format::FreeRecord& r) {
  at(r.time_ns);
  growth.thread(r.thread_id);
  if (r.address == 0) return;  // cudaFree(nullptr): a no-op (often used to create the context)
  if (r.result != 0) {
    ++summary.failed_frees;
    return;
  }
  LiveRecords& table = live[address_class(r.kind)];
  const size_t slot = table.find_slot(r.address);
  if (slot == table.kNone) {
    ++summary.unmatched_frees;
    return;
  }
  if (r.kind == MemoryKind::kPhysical) [[unlikely]]
    if (vmm_release_kept(r.address)) return;
  const LiveRecord& a = table.at_slot(slot);
  ++summary.frees;
  ++summary.by_kind[a.traits & kKindBits].frees;
  const bool device = a.traits & kDeviceMemoryTrait;
  const uint64_t size = a.size;
  forget(a);
  table.erase_slot(slot);  // last: a is the table's record
  if (device) timeline_point(r.time_ns);
  if (r.kind == MemoryKind::kMapping) [[unlikely]]
    vmm_unmap(r, size);
}

// ---- VMM ----

void Replay::Core::vmm_alloc(const format::AllocRecord& r, bool replaced) {
  if (r.kind == MemoryKind::kPhysical) return vmm.replaced(r.address);
  // A mapping where one is live: that one's unmap was missed, and with it its hold on its handle.
  if (replaced)
    if (const uint64_t h = vmm.unmap(r.address)) vmm_free_handle(h, r.time_ns);
  const LiveRecords& handles = live[address_class(MemoryKind::kPhysical)];
  if (r.stream != 0 && handles.find_slot(r.stream) != handles.kNone) vmm.map(r.address, r.stream);
}

bool Replay::Core::vmm_release_kept(uint64_t handle) {
  switch (vmm.release(handle)) {
    case VmmHandles::Release::kFree: return false;
    case VmmHandles::Release::kKeep:
      ++summary.frees;
      ++summary.by_kind[static_cast<uint8_t>(MemoryKind::kPhysical)].frees;
      return true;
    case VmmHandles::Release::kAgain: ++summary.unmatched_frees; return true;
  }
  return false;
}

// A cuMemUnmap, its first mapping already taken out: that mapping lets go of its handle, and so do
// the adjacent mappings after it inside the range (its size is in the stream field; 0 in older
// traces), each of them a free too.
void Replay::Core::vmm_unmap(const format::FreeRecord& r, uint64_t first_size) {
  if (const uint64_t h = vmm.unmap(r.address)) vmm_free_handle(h, r.time_ns);
  LiveRecords& table = live[address_class(MemoryKind::kMapping)];
  const uint64_t end = r.address + r.stream;
  for (uint64_t next = r.address + first_size; first_size != 0 && next < end;) {
    const size_t slot = table.find_slot(next);
    if (slot == table.kNone) break;
    const LiveRecord& a = table.at_slot(slot);
    const uint64_t size = a.size;
    ++summary.frees;
    ++summary.by_kind[a.traits & kKindBits].frees;
    forget(a);
    table.erase_slot(slot);  // last: a is the table's record
    if (const uint64_t h = vmm.unmap(next)) vmm_free_handle(h, r.time_ns);
    if (size == 0) break;
    next += size;
  }
}

// Released physical memory whose last mapping went: its bytes leave every count now (its free was
// counted at the release).
void Replay::Core::vmm_free_handle(uint64_t handle, uint64_t time_ns) {
  LiveRecords& table = live[address_class(MemoryKind::kPhysical)];
  const size_t slot = table.find_slot(handle);
  if (slot == table.kNone) return;
  forget(table.at_slot(slot));
  table.erase_slot(slot);
  timeline_point(time_ns);
}

// Physical memory released while mapped is held by its mapping: a survivor belongs to the line
// that mapped it and names the line that created it. Of several mappings, the earliest (ties: the
// lowest address) holds it.
void Replay::Core::attribute_to_mappings(std::vector<LiveAlloc>& out) const {
  std::unordered_map<uint64_t, uint64_t> handle_of;  // live mappings of released handles
  vmm.for_each_mapping([&](uint64_t address, uint64_t handle) {
    if (vmm.released(handle)) handle_of.emplace(address, handle);
  });
  std::unordered_map<uint64_t, const LiveAlloc*> holder;  // handle -> its earliest mapping
  for (const LiveAlloc& m : out) {
    if (m.kind != MemoryKind::kMapping) continue;
    auto h = handle_of.find(m.address);
    if (h == handle_of.end()) continue;
    const LiveAlloc*& best = holder[h->second];
    if (!best || std::tie(m.time_ns, m.address) < std::tie(best->time_ns, best->address)) best = &m;
  }
  for (LiveAlloc& a : out) {
    if (a.kind != MemoryKind::kPhysical) continue;
    auto h = holder.find(a.address);
    if (h == holder.end()) continue;
    a.created_stack_id = a.stack_id;
    a.stack_id = h->second->stack_id;
    a.api = h->second->api;
  }
}

// Tensor blocks live in the allocator's segments: they are counted on their own, never in the
// device-memory counters (the segments are, through the runtime hooks).
void Replay::Core::torch_alloc(const format::TorchEventRecord& r) {
  TorchCounters& t = summary.torch;
  ++t.allocs;
  auto [slot, inserted] = torch_live.try_emplace(r.address);
  TorchRecord& a = *slot;
  if (!inserted) {  // its free was missed: the new block replaces it
    --t.live_blocks;
    t.live_block_bytes -= a.size;
    site_sub(a);
    devices.blocks(a.device, 0, a.size);
    categories.block_free(a.device, a.size, a.category, a.site);
  }
  const uint32_t site =
      site_of(RawSite{r.stack_id, Api::kUnknown, MemoryKind::kDevice, true}, r.device);
  static_cast<LiveRecord&>(a) = new_record(site, r.size, r.time_ns, r.device);
  a.category = categories.block_alloc(r.size);
  a.window = site_add(site, r.size);
  devices.blocks(r.device, r.size, 0);
  ++t.live_blocks;
  t.live_block_bytes += r.size;
  peaks.torch_alloc(r.size, t.live_block_bytes, r.time_ns);
  categories.point(r.time_ns, live_device_bytes, devices);
}

void Replay::Core::torch_free(const format::TorchEventRecord& r) {
  TorchCounters& t = summary.torch;
  ++t.frees;
  if (const size_t slot = torch_live.find_slot(r.address); slot != torch_live.kNone) {
    const TorchRecord& a = torch_live.at_slot(slot);
    --t.live_blocks;
    t.live_block_bytes -= a.size;
    site_sub(a);
    devices.blocks(a.device, 0, a.size);
    peaks.torch_free(a.size, in_this_step(a));
    categories.block_free(a.device, a.size, a.category, a.site);
    torch_live.erase_slot(slot);  // last: a is the table's record
  }
}

// The block a tag names is the one live at that address now (the storage's data pointer is the
// block's address); a tag for no live block is counted and dropped.
void Replay::Core::torch_tag(const format::TorchEventRecord& r) {
  const size_t slot = torch_live.find_slot(r.address);
  if (slot == torch_live.kNone) return categories.unmatched_tag();
  TorchRecord& a = torch_live.at_slot(slot);
  const uint8_t category = r.size <= UINT8_MAX ? static_cast<uint8_t>(r.size) : 0;
  categories.tag(a.device, a.size, a.category, category);
}

void Replay::Core::backward_begins() {
  categories.backward_begins(
      [this](auto&& f) { torch_live.for_each_record([&](TorchRecord& a) { f(a.category, a.site, a.size); }); });
}

// An OOM's categories are of its device: its live tensor blocks by kind (OOMs are few).
void Replay::Core::categories_oom(uint64_t time_ns, int32_t device, uint64_t requested, bool torch,
                                  bool has_device_free, uint64_t device_free) {
  CategoryTracker::Kinds kinds{};
  uint64_t allocated = 0, in_pass = 0;
  torch_live.for_each([&](uint64_t, const TorchRecord& a) {
    if (a.device != device) return;
    kinds[CategoryTracker::kind_of(a.category.category)] += a.size;
    allocated += a.size;
    if (categories.in_pass(a.category)) in_pass += a.size;
  });
  categories.oom(time_ns, device, requested, torch, has_device_free, device_free, kinds, allocated,
                 in_pass, devices);
}

void Replay::Core::step(const format::MarkerRecord& r) {
  ++summary.steps;
  peaks.step();
  growth.step(summary.steps, r.time_ns, site_live);
  categories.step(r.time_ns, live_device_bytes, devices);
}

void Replay::Core::finish() {
  torch_live.for_each([this](uint64_t, const TorchRecord& a) {
    categories.live_at_end(a.site, a.size, a.category);
  });
  categories.finish();
  timeline.finish();
  growth.finish(sites.size());
  const uint64_t end = std::max(last_time_ns, last_event_ns);
  for (const DeviceMemoryTrack& d : devices.all())
    if (d.seen && d.torch) devices.finish(d.device, end, torch_blocks(d.device));
}

// ---- The Replay: its events are the core's ----

Replay::Replay() : core_(std::make_unique<Core>()) {}
Replay::~Replay() = default;
Replay::Replay(Replay&&) noexcept = default;
Replay& Replay::operator=(Replay&&) noexcept = default;

void Replay::alloc(const format::AllocRecord& r) {
  core_->alloc(r);
}
void Replay::free(const format::FreeRecord& r) {
  core_->free(r);
}

void Replay::failed(const format::AllocFailedRecord& r) {
  Core& c = *core_;
  c.at(r.time_ns);
  ++c.summary.failed_allocations;
  const FailureEvent& f = c.failures.failed(r, c.live_device_bytes);
  c.devices.failure(f);
  if (f.error == kOutOfMemory && is_device_memory_kind(f.kind)) {
    c.categories_oom(f.time_ns, f.device, f.size, false, f.has_meminfo, f.meminfo_free);
    c.accounting.oom(f.time_ns, f.device);
  }
}

void Replay::meminfo(const format::MemInfoRecord& r) {
  Core& c = *core_;
  c.at(r.time_ns);
  c.failures.meminfo(r);
  c.devices.meminfo(r);
  c.accounting.meminfo(r, c.live_on(r.device), c.peaks.time_ns());
}

void Replay::process_memory(const format::ProcessMemoryRecord& r) {
  Core& c = *core_;
  c.accounting.process_memory(r, c.live_on(r.device), c.peaks.time_ns());
}

void Replay::marker(const format::MarkerRecord& r) {
  Core& c = *core_;
  c.at(r.time_ns);
  ++c.summary.markers;
  switch (r.kind) {
    case format::MarkerKind::kStep:
      c.step(r);
      break;
    case format::MarkerKind::kRangePush:
      c.regions.push(r);
      if (r.name == kBackwardRange) c.backward_begins();
      break;
    case format::MarkerKind::kRangePop:
      c.regions.pop(r);
      if (r.name == kBackwardRange) c.categories.backward_ends();
      break;
    default:
      break;
  }
}

void Replay::torch(const format::TorchEventRecord& r) {
  Core& c = *core_;
  c.at(r.time_ns);
  c.growth.thread(r.thread_id);
  TorchCounters& t = c.summary.torch;
  ++t.events;
  switch (r.action) {
    case format::TorchAction::kAlloc:
      c.torch_alloc(r);
      break;
    case format::TorchAction::kFreeCompleted:
      c.torch_free(r);
      break;
    case format::TorchAction::kSegmentAlloc:
    case format::TorchAction::kSegmentMap:
      if (r.action == format::TorchAction::kSegmentAlloc) ++t.segment_allocs;
      c.devices.segment_alloc(r);
      c.categories.point(r.time_ns, c.live_device_bytes, c.devices);
      break;
    case format::TorchAction::kSegmentFree:
    case format::TorchAction::kSegmentUnmap:
      if (r.action == format::TorchAction::kSegmentFree) ++t.segment_frees;
      c.devices.segment_free(r);
      break;
    case format::TorchAction::kOom:
      ++t.ooms;
      c.accounting.oom(r.time_ns, r.device);
      if (c.devices.takes_ooms()) c.devices.torch_oom(r, c.torch_blocks(r.device));
      c.categories_oom(r.time_ns, r.device, r.size, true, true, r.address);
      return;
    case format::TorchAction::kTag:
      c.torch_tag(r);
      return;
    default:
      return;  // free_requested; later actions are ignored
  }
  c.timeline_point(r.time_ns);
}

void Replay::seen_time(uint64_t t) {
  if (t > core_->last_time_ns) core_->last_time_ns = t;
}

void Replay::finish() {
  core_->finish();
}

void Replay::set_site_groups(std::vector<uint32_t> group_of) {
  Core& c = *core_;
  c.timeline.set_site_groups(std::move(group_of));
  for (uint32_t i = 0; i < c.site_hot.size(); ++i) c.site_hot[i].group = c.timeline.group_of(i);
}

// ---- What the core shows ----

const Summary& Replay::summary() const {
  return core_->summary;
}
uint64_t Replay::last_time_ns() const {
  return std::max(core_->last_time_ns, core_->last_event_ns);
}
uint64_t Replay::live_device_bytes() const {
  return core_->live_device_bytes;
}
const std::vector<RawSite>& Replay::sites() const {
  return core_->sites;
}
const std::vector<uint64_t>& Replay::site_live() const {
  return core_->site_live;
}
int32_t Replay::site_device(uint32_t site) const {
  return core_->site_hot[site].device;
}
uint64_t Replay::site_peak(uint32_t site) const {
  return core_->site_hot[site].peak;
}
bool Replay::is_timeline_site(uint32_t site) const {
  return core_->is_timeline_site(site);
}
const GrowthSampling& Replay::growth_samples() const {
  return core_->growth;
}
const TimelineTracker& Replay::timeline() const {
  return core_->timeline;
}
const Peaks& Replay::peaks() const {
  return core_->peaks;
}
const DeviceTracker& Replay::devices() const {
  return core_->devices;
}
const RegionTracker& Replay::regions() const {
  return core_->regions;
}
const std::vector<FailureEvent>& Replay::failures() const {
  return core_->failures.events();
}
const CategoryTracker& Replay::categories() const {
  return core_->categories;
}

const AccountingTracker& Replay::accounting() const {
  return core_->accounting;
}

std::vector<LiveAlloc> Replay::live() const {
  const Core& c = *core_;
  std::vector<LiveAlloc> out;
  size_t n = c.torch_live.size();
  for (const auto& table : c.live) n += table.size();
  out.reserve(n);
  auto add = [&](uint64_t address, const Core::LiveRecord& a) {
    out.push_back(c.expand(address, a));
  };
  for (const auto& table : c.live) table.for_each(add);
  c.torch_live.for_each([&](uint64_t address, const Core::TorchRecord& a) {
    add(address, a);
    out.back().category = CategoryTracker::code_of(a.category);
  });
  if (c.vmm.any_released()) [[unlikely]]
    c.attribute_to_mappings(out);
  std::sort(out.begin(), out.end(), [](const LiveAlloc& x, const LiveAlloc& y) {
    if (x.time_ns != y.time_ns) return x.time_ns < y.time_ns;
    if (x.torch_block != y.torch_block) return y.torch_block;
    if (x.kind != y.kind) return x.kind < y.kind;
    return x.address < y.address;
  });
  return out;
}

}  // namespace gpumemshim::analyzer

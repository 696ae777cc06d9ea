// The replay's core (replay.h): its state and the per-event work, which Replay's events do
// inline. Included by replay.cpp alone: the cache-line layout of a live record and of a site's
// per-change data is nobody else's concern.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "findings/accounting.h"
#include "replay/address_key.h"
#include "replay/live_table.h"
#include "replay/replay.h"
#include "replay/vmm_handles.h"

namespace gpumemshim::analyzer {

struct Replay::Core {
  // What the replay keeps of a live allocation: half a cache line. The rest is its site's (stack,
  // API, kind, tensor block) and its key's (the address); live() puts them back together. Its
  // site's traits are copied in, so that a free does not load the site's SiteHot line (a cache
  // miss in a busy trace, where the allocation loaded it anyway).
  struct LiveRecord {
    uint64_t size;
    uint64_t time_ns;
    uint32_t site;
    uint32_t region : 24;  // RegionTracker::kNone: none
    uint32_t traits : 8;   // its site's SiteHot::traits
    int16_t device;        // kFarDevice: one outside int16_t, which no tracker keeps
    AllocationWindows::Tag window;  // GrowthSampling::allocated's
    uint32_t step;  // the steps seen before it, modulo 2^32 (step_of: exact below 2^32 steps apart)
  };
  static_assert(sizeof(LiveRecord) == 32, "a live record is half a cache line");
  // A device number beyond int16_t (a damaged trace): negative, so no device tracker counts it,
  // as none counts the number it stands for (DeviceTracker keeps devices 0..4095).
  static constexpr int16_t kFarDevice = INT16_MIN;
  static int16_t record_device(int32_t device) {
    return device >= INT16_MIN && device <= INT16_MAX ? static_cast<int16_t>(device) : kFarDevice;
  }
  // What a site is, in one byte: its memory kind (3 bits), whether that is device memory
  // (is_device_memory_kind) and whether it is a timeline site (is_timeline_site).
  static constexpr uint8_t kKindBits = 7, kDeviceMemoryTrait = 8, kTimelineTrait = 16;
  // What every change of a site's bytes reads and writes besides the bytes, in one 32-byte entry
  // (a site out of the cache costs one line, not one per array): the growth samplers' stamp
  // (GrowthSampling::wants_touch), its peak, its timeline group. (The peak tracker logs every
  // change instead: peaks come far more often than the samplers' boundaries.)
  struct alignas(32) SiteHot {
    uint64_t stamp = 0;                          // GrowthSampling::touch's last
    uint64_t peak = 0;                           // site_peak
    uint32_t group = TimelineTracker::kNoGroup;  // set_site_groups' group
    int32_t device = 0;                          // site_device
    uint8_t traits = 0;                          // the site's kind and traits (k...Trait)
  };
  // The raw sites by (stack, tag), every one of them: open addressing with linear probing, kept at
  // most half full, 16-byte entries. A lookup is a multiply and one or two compares, with no miss
  // to fall back from (a direct-mapped memo in front of a map of RawSite missed on a third of a
  // few thousand sites).
  struct SiteSlot {
    uint64_t stack_id = 0;
    uint32_t tag = 0;  // site_tag: never 0, so 0 marks an empty slot
    uint32_t site = 0;
  };
  struct AddressHash {  // FlatMap::hash mixes the bits itself
    size_t operator()(uint64_t a) const noexcept { return static_cast<size_t>(a); }
  };
  // Live allocations by address, one table per address class (address_key.h): a key of the
  // address alone keeps each slot (key, record, generation, distance) within one cache line.
  using LiveRecords = LiveTable<uint64_t, LiveRecord, AddressHash>;
  // A tensor block's record: its category in the slot's padding (a slot of the table stays one
  // cache line).
  struct TorchRecord : LiveRecord {
    BlockCategory category;
  };
  static_assert(sizeof(TorchRecord) <= 40, "a tensor block's slot must stay within a cache line");
  using TorchRecords = LiveTable<uint64_t, TorchRecord, AddressHash>;

  // The clock: every timed event passes here first.
  void at(uint64_t time_ns) {
    if (time_ns > last_event_ns) last_event_ns = time_ns;
  }

  // Raw sites. Inline (as are site_add and site_sub) in the events: a call each cost more than
  // their work.
  [[gnu::always_inline]] inline uint32_t site_of(const RawSite& s, int32_t device);
  [[gnu::noinline]] uint32_t add_site(const RawSite& s, int32_t device);  // a site never seen
  static uint32_t site_tag(const RawSite& s) {
    return 0x80000000u | (uint32_t{static_cast<uint8_t>(s.api)} << 16) |
           (uint32_t{static_cast<uint8_t>(s.kind)} << 8) | (s.torch_block ? 1u : 0u);
  }
  size_t site_slot_home(uint64_t stack_id, uint32_t tag) const {
    return static_cast<size_t>((stack_id * 0x9E3779B97F4A7C15ull ^ tag) >> site_slot_shift);
  }
  void place_site_slot(const SiteSlot& slot);  // into the first free slot from its home
  void grow_site_slots();
  bool is_timeline_site(uint32_t site) const {
    return !sites[site].torch_block && is_device_memory_kind(sites[site].kind);
  }
  // Returns the growth windows' tag for the allocation's record.
  [[gnu::always_inline]] inline AllocationWindows::Tag site_add(uint32_t site, uint64_t bytes);
  // A live allocation's bytes leave its site: from its record, which holds the site's traits, so
  // the site's SiteHot line is read only while a sampler wants touches or groups are summed.
  [[gnu::always_inline]] inline void site_sub(const LiveRecord& a);

  // The live set.
  // The record of an allocation made now at `site` (allocations and tensor blocks alike).
  LiveRecord new_record(uint32_t site, uint64_t size, uint64_t time_ns, int32_t device) const {
    return LiveRecord{size,
                      time_ns,
                      site,
                      regions.open(),
                      site_hot[site].traits,
                      record_device(device),
                      0,
                      static_cast<uint32_t>(summary.steps)};
  }
  uint64_t step_of(const LiveRecord& a) const {
    return summary.steps - static_cast<uint32_t>(static_cast<uint32_t>(summary.steps) - a.step);
  }
  bool in_this_step(const LiveRecord& a) const {
    return a.step == static_cast<uint32_t>(summary.steps);
  }
  // Takes a live allocation out of every count (not out of its table).
  [[gnu::always_inline]] inline void forget(const LiveRecord& a);
  LiveAlloc expand(uint64_t address, const LiveRecord& a) const;
  TorchBlocks torch_blocks(int32_t device) const;  // the live tensor blocks of a device
  void categories_oom(uint64_t time_ns, int32_t device, uint64_t requested, bool torch,
                      bool has_device_free, uint64_t device_free);

  // Dispatch: the parts of the events.
  [[gnu::always_inline]] inline void alloc(const format::AllocRecord& r);
  [[gnu::always_inline]] inline void free(const format::FreeRecord& r);
  // VMM physical memory is freed at the later of its release and its last unmap (vmm_handles.h).
  [[gnu::noinline]] void vmm_alloc(const format::AllocRecord& r, bool replaced);
  [[gnu::noinline]] bool vmm_release_kept(uint64_t handle);  // true: the release freed nothing now
  [[gnu::noinline]] void vmm_unmap(const format::FreeRecord& r, uint64_t first_size);
  void vmm_free_handle(uint64_t handle, uint64_t time_ns);
  void attribute_to_mappings(std::vector<LiveAlloc>& out) const;
  void torch_alloc(const format::TorchEventRecord& r);
  void torch_free(const format::TorchEventRecord& r);
  void torch_tag(const format::TorchEventRecord& r);
  void backward_begins();  // a "torch.backward" range opens (categories' activation candidates)
  void step(const format::MarkerRecord& r);
  // Memory over time, after an event that changed device or allocator bytes.
  [[gnu::always_inline]] void timeline_point(uint64_t time_ns) {
    const bool torch = summary.torch.events != 0;  // without the bridge's events both are 0
    timeline.point(time_ns, live_device_bytes, torch ? devices.reserved_bytes() : 0,
                   torch ? devices.allocated_bytes() : 0);
  }
  void finish();
  // The live device bytes of one device now (for the device views' samples).
  uint64_t live_on(int32_t device) const {
    const std::vector<DeviceMemoryTrack>& all = devices.all();
    const auto d = static_cast<size_t>(device);
    return d < all.size() && all[d].seen ? all[d].live_device_bytes : 0;
  }

  // The raw sites.
  std::vector<RawSite> sites;
  std::vector<SiteHot> site_hot;
  std::vector<uint64_t> site_live;
  // 64 slots to start (grown as sites come): a replay is made per trace read, and a small trace
  // has a few sites.
  int site_slot_shift = 64 - 6;
  std::vector<SiteSlot> site_slots = std::vector<SiteSlot>(size_t{1} << 6);
  // The trackers.
  GrowthSampling growth;
  TimelineTracker timeline;
  Peaks peaks;
  RegionTracker regions;
  DeviceTracker devices;
  FailureLog failures;
  CategoryTracker categories;
  AccountingTracker accounting;
  // The live set.
  std::array<LiveRecords, kAddressClasses> live;
  TorchRecords torch_live;  // tensor blocks by address
  VmmHandles vmm;          // which handle each mapping holds
  Summary summary;
  uint64_t live_device_bytes = 0;
  // The clock.
  uint64_t last_time_ns = 0;   // seen_time's
  uint64_t last_event_ns = 0;  // at()'s: the latest event
};

}  // namespace gpumemshim::analyzer

// Replays one process's alloc/free events: the live set, counters, peaks and failures.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "replay/address_key.h"
#include "replay/flat_map.h"
#include "findings/growth.h"
#include "replay/live_table.h"
#include "replay/model.h"
#include "findings/peak_sites.h"
#include "findings/timeline_samples.h"
#include "gpumemshim/format/records.h"

namespace gpumemshim::analyzer {

struct LiveAlloc {
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stack_id = 0;
  uint64_t time_ns = 0;
  int32_t device = 0;
  Api api = Api::kUnknown;
  MemoryKind kind = MemoryKind::kDevice;
  uint64_t step = 0;            // steps seen before the allocation (for step-aware findings later)
  bool torch_block = false;     // a tensor block of PyTorch's caching allocator (TorchEvent alloc)
  uint32_t site = 0;            // raw site index (Replay::sites())
  uint32_t region = kNoRegion;  // innermost expect_no_leak region open when it was allocated
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

// An expect_no_leak region (a range named "expect_no_leak:<name>").
struct Region {
  std::string name;  // without the prefix
  uint64_t thread_id = 0;
  uint64_t begin_ns = 0;
  uint64_t end_ns = UINT64_MAX;  // UINT64_MAX: never closed (ends with the trace)
};

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
};

// A failed allocation as the report lists it, and the raw stack the report symbolizes.
struct FailureEvent : FailedAllocation {
  uint64_t stack_id = 0;
};

class Replay {
 public:
  Replay();
  void alloc(const format::AllocRecord& r);
  void free(const format::FreeRecord& r);
  void failed(const format::AllocFailedRecord& r);
  void meminfo(const format::MemInfoRecord& r);
  void marker(const format::MarkerRecord& r);
  void torch(const format::TorchEventRecord& r);
  // A time seen besides the events' (the End record's).
  void seen_time(uint64_t t) {
    if (t > last_time_ns_) last_time_ns_ = t;
  }
  // After the last event.
  void finish();

  const Summary& summary() const { return summary_; }
  const std::vector<FailureEvent>& failures() const { return failures_; }
  uint64_t last_time_ns() const { return std::max(last_time_ns_, last_event_ns_); }
  uint64_t live_device_bytes() const { return live_device_bytes_; }
  // Everything alive now, in allocation order (ties by address).
  std::vector<LiveAlloc> live() const;
  // The time buckets, including the last (still open) one.
  SiteSampler time_samples_closed() const;
  uint64_t last_time_bucket() const { return last_event_ns_ / kTimeTickNs + 1; }
  // The caching allocator's state now on a device (at the end, after the replay).
  TorchSnapshot snapshot(int32_t device, uint64_t time_ns) const;
  const std::vector<uint64_t>& site_live() const { return site_live_; }
  // At the device-memory peak: the bytes allocated since the last step marker (activations and
  // temporaries of the step in progress), and the same for the peak of live tensor blocks.
  uint64_t peak_in_step_bytes() const { return peak_in_step_; }
  uint64_t torch_peak_bytes() const { return torch_peak_; }
  uint64_t torch_peak_in_step_bytes() const { return torch_peak_in_step_; }
  uint64_t peak_time_ns() const { return peak_time_ns_; }  // when peak_bytes was reached
  uint64_t torch_peak_time_ns() const { return torch_peak_time_ns_; }  // ... torch_peak_bytes

  const std::vector<RawSite>& sites() const { return sites_; }
  // The device a raw site allocated on (-1: several).
  int32_t site_device(uint32_t site) const { return site_hot_[site].device; }
  // What each site held when live device bytes peaked (PeakSiteTracker::at_peak(site_live())).
  const PeakSiteTracker& peak_sites() const { return peak_sites_; }
  // Complete once finish() ran.
  const SiteSampler& step_samples() const { return step_sampler_; }
  uint64_t time_tick_ns() const { return kTimeTickNs; }
  const std::vector<Region>& regions() const { return regions_; }
  // Devices that had events, by device number (entries with seen == false are gaps).
  const std::vector<DeviceMemoryTrack>& devices() const { return devices_; }
  const std::vector<OomEvent>& ooms() const { return ooms_; }

  // For the timeline (timeline.h), gathered in the same pass. A timeline site is a raw site of
  // device memory (not a tensor block): the sites that make up live device bytes.
  bool is_timeline_site(uint32_t site) const {
    return !sites_[site].torch_block && is_device_memory_kind(sites_[site].kind);
  }
  const TimelineSampler& timeline_samples() const { return timeline_; }
  // A site's own highest live bytes.
  uint64_t site_peak(uint32_t site) const { return site_hot_[site].peak; }
  // The times of the first kMaxStepTimes steps.
  const std::vector<uint64_t>& step_times() const { return step_times_; }
  static constexpr size_t kMaxStepTimes = 10000;
  uint64_t torch_reserved_bytes() const;  // now, over all devices
  uint64_t torch_allocated_bytes() const;
  // Groups of timeline sites (site -> group, UINT32_MAX: none), set before the replay: each group's
  // highest sum of live bytes is then tracked (the timeline's sites that symbolize alike).
  void set_site_groups(std::vector<uint32_t> group_of);
  const std::vector<uint64_t>& group_peaks() const { return groups_.peak; }
  // The same peaks computed after the replay, from its log of timeline-site changes, when the log
  // is complete (at most kMaxSiteLog changes, sites below 2^24, changes below 2^39 bytes): no
  // second read of the trace. Real traces group raw stacks that differ only in the shim's own
  // frames into one call site, so this is the usual case.
  static constexpr size_t kMaxSiteLog = size_t{1} << 21;  // 16 MiB of log at most
  bool site_log_complete() const { return site_log_on_; }
  std::vector<uint64_t> group_peaks_from_log(const std::vector<uint32_t>& group_of) const;

 private:
  // What the replay keeps of a live allocation: half a cache line. The rest is its site's (stack,
  // API, kind, tensor block) and its key's (the address); live() puts them back together. Its
  // site's traits are copied in, so that a free does not load the site's SiteHot line (a cache
  // miss in a busy trace, where the allocation loaded it anyway).
  struct LiveRecord {
    uint64_t size;
    uint64_t time_ns;
    uint32_t site;
    uint32_t region : 24;  // kNoLiveRegion: none
    uint32_t traits : 8;   // its site's SiteHot::traits
    int32_t device;
    uint32_t step;  // the steps seen before it, modulo 2^32 (step_of: exact below 2^32 steps apart)
  };
  static constexpr uint32_t kNoLiveRegion = (uint32_t{1} << 24) - 1;
  static constexpr size_t kMaxRegions = kNoLiveRegion;  // regions opened at most
  // What a site is, in one byte: its memory kind (3 bits), whether that is device memory
  // (is_device_memory_kind) and whether it is a timeline site (is_timeline_site).
  static constexpr uint8_t kKindBits = 7, kDeviceMemoryTrait = 8, kTimelineTrait = 16;
  uint64_t step_of(const LiveRecord& a) const {
    return summary_.steps - static_cast<uint32_t>(static_cast<uint32_t>(summary_.steps) - a.step);
  }
  bool in_this_step(const LiveRecord& a) const {
    return a.step == static_cast<uint32_t>(summary_.steps);
  }
  LiveAlloc expand(uint64_t address, const LiveRecord& a) const;
  // The record of an allocation made now at `site` (allocations and tensor blocks alike).
  LiveRecord new_record(uint32_t site, uint64_t size, uint64_t time_ns, int32_t device) const {
    return LiveRecord{size,
                      time_ns,
                      site,
                      open_region(),
                      site_hot_[site].traits,
                      device,
                      static_cast<uint32_t>(summary_.steps)};
  }
  // Inline (defined in replay.cpp, their only user, as are site_add and site_sub) in alloc and
  // free: a call each cost more than their work.
  [[gnu::always_inline]] inline void forget(const LiveRecord& a);  // takes a live allocation out of every count (not the map)
  [[gnu::always_inline]] inline uint32_t site_of(const RawSite& s, int32_t device);
  [[gnu::noinline]] uint32_t add_site(const RawSite& s, int32_t device);  // a site never seen
  // The raw sites by (stack, tag), every one of them: open addressing with linear probing, kept at
  // most half full, 16-byte entries. A lookup is a multiply and one or two compares, with no miss
  // to fall back from (a direct-mapped memo in front of a map of RawSite missed on a third of a
  // few thousand sites).
  struct SiteSlot {
    uint64_t stack_id = 0;
    uint32_t tag = 0;  // site_tag: never 0, so 0 marks an empty slot
    uint32_t site = 0;
  };
  static uint32_t site_tag(const RawSite& s) {
    return 0x80000000u | (uint32_t{static_cast<uint8_t>(s.api)} << 16) |
           (uint32_t{static_cast<uint8_t>(s.kind)} << 8) | (s.torch_block ? 1u : 0u);
  }
  size_t site_slot_home(uint64_t stack_id, uint32_t tag) const {
    return static_cast<size_t>((stack_id * 0x9E3779B97F4A7C15ull ^ tag) >> site_slot_shift_);
  }
  void place_site_slot(const SiteSlot& slot);  // into the first free slot from its home
  void grow_site_slots();
  int site_slot_shift_ = 64 - 12;
  std::vector<SiteSlot> site_slots_ = std::vector<SiteSlot>(size_t{1} << 12);
  [[gnu::always_inline]] inline void site_add(uint32_t site, uint64_t bytes);
  // A live allocation's bytes leave its site: from its record, which holds the site's traits, so
  // the site's SiteHot line is read only while a sampler wants touches or groups are summed.
  [[gnu::always_inline]] inline void site_sub(const LiveRecord& a);
  // What every change of a site's bytes reads and writes besides the bytes, in one 32-byte entry (a
  // site out of the cache costs one line, not one per array). A sampler that
  // wants touches only needs to see a site once after each of its boundaries: both are behind one
  // stamp, bumped at either's boundary, so a site's change costs one comparison until the next, and
  // none while neither wants touches (touching_). (The peak tracker logs every change instead:
  // peaks come far more often than boundaries.)
  struct alignas(32) SiteHot {
    uint64_t stamp = 0;           // stamp_ when the trackers last saw the site
    uint64_t peak = 0;            // site_peak
    uint32_t group = UINT32_MAX;  // set_site_groups' group, UINT32_MAX: none
    int32_t device = 0;           // site_device
    uint8_t traits = 0;           // the site's kind and traits (k...Trait)
  };
  // After either sampler's boundary: every site is unseen again, and either may now want touches.
  void new_stamp() {
    ++stamp_;
    touching_ = step_sampler_.wants_touches() || time_sampler_.wants_touches();
  }
  [[gnu::noinline]] void site_seen(uint32_t site, SiteHot& hot);
  // Every timed event passes here first: the time, and the time buckets it closes.
  void at(uint64_t time_ns) {
    if (time_ns >= next_kept_ns_) [[unlikely]]
      tick(time_ns);
    if (time_ns > last_event_ns_) last_event_ns_ = time_ns;
  }
  [[gnu::noinline]] void tick(uint64_t time_ns);
  void torch_allocated(int32_t device, uint64_t add, uint64_t sub);
  [[gnu::always_inline]] void timeline_point(uint64_t time_ns) {
    const bool torch = summary_.torch.events != 0;  // without the bridge's events both are 0
    timeline_.point(time_ns, live_device_bytes_, torch ? torch_reserved_bytes() : 0,
                    torch ? torch_allocated_bytes() : 0);
  }
  // Running sums of live bytes per group of sites and their highest values: kept during the replay
  // (set_site_groups) or rebuilt afterwards from the site-change log (group_peaks_from_log).
  struct GroupSums {
    explicit GroupSums(const std::vector<uint32_t>& group_of = {});  // as many as the highest group
    // Group g's bytes change by `delta` (modulo 2^64: a decrease is its negation).
    void change(uint32_t g, uint64_t delta) {
      live[g] += delta;
      peak[g] = std::max(peak[g], live[g]);
    }
    std::vector<uint64_t> live, peak;
  };
  // One change in 8 bytes: the site in the top 24 bits, the signed change in the low 40.
  static constexpr int kDeltaBits = 40;
  [[gnu::always_inline]] void log_site_change(uint32_t site, int64_t delta) {
    if (!site_log_on_) return;
    constexpr int64_t kLimit = int64_t{1} << (kDeltaBits - 1);
    if (site_log_.size() == kMaxSiteLog || site >= (1u << (64 - kDeltaBits)) || delta >= kLimit ||
        delta <= -kLimit) {  // does not fit: the timeline reads the trace again instead
      site_log_on_ = false;
      site_log_ = {};
      return;
    }
    site_log_.push_back((uint64_t{site} << kDeltaBits) |
                        (static_cast<uint64_t>(delta) & ((uint64_t{1} << kDeltaBits) - 1)));
  }

  std::vector<RawSite> sites_;
  std::vector<SiteHot> site_hot_;
  uint64_t stamp_ = 1;
  bool touching_ = true;     // a sampler wants touches (SiteSampler::wants_touches)
  uint64_t site_changes_ = 0;  // site_add and site_sub calls so far (for the samplers)
  std::vector<uint64_t> site_live_;
  TimelineSampler timeline_;
  std::vector<uint64_t> step_times_;
  std::vector<uint32_t> group_of_;
  std::vector<uint64_t> site_log_;  // timeline sites' changes in replay order (log_site_change)
  bool site_log_on_ = true;
  GroupSums groups_;
  uint64_t in_step_ = 0, peak_in_step_ = 0;  // device bytes allocated in the current step, live
  uint64_t torch_in_step_ = 0, torch_peak_ = 0, torch_peak_in_step_ = 0;
  uint64_t peak_time_ns_ = 0, torch_peak_time_ns_ = 0;
  PeakSiteTracker peak_sites_;
  SiteSampler step_sampler_{kMaxStepPoints};
  void step_boundary();
  // A step boundary the step sampler has not seen (step_boundary: a later one overwrites its kept
  // point unless it is the last): every site's bytes then, given to the sampler by finish() when no
  // step came after it. Index 0: none.
  uint64_t pending_step_ = 0, pending_step_changes_ = 0;
  std::vector<uint64_t> pending_step_live_;
  SiteSampler time_sampler_{kMaxTimePoints};
  // The time from which an event is in a time bucket the time sampler keeps apart from the last
  // event's (every stride()-th bucket of kTimeTickNs is kept): a boundary, tick().
  uint64_t next_kept_ns_ = 0;
  std::vector<Region> regions_;
  std::vector<uint32_t> open_regions_;
  // The innermost expect_no_leak region open now (kNoLiveRegion: none).
  uint32_t open_region() const {
    return open_regions_.empty() ? kNoLiveRegion : open_regions_.back();
  }
  // nullptr for implausible device numbers (inline: every device allocation and free asks)
  DeviceMemoryTrack* device_track(int32_t device) {
    if (static_cast<size_t>(device) < device_count_) [[likely]] {  // negative ones are huge
      DeviceMemoryTrack& d = devices_[static_cast<size_t>(device)];
      if (d.seen) [[likely]]
        return &d;
    }
    return new_device_track(device);
  }
  DeviceMemoryTrack* new_device_track(int32_t device);
  std::vector<DeviceMemoryTrack> devices_;
  size_t device_count_ = 0;  // devices_.size(), without a division by the track's size per event
  std::vector<OomEvent> ooms_;

  struct AddressHash {  // FlatMap::hash mixes the bits itself
    size_t operator()(uint64_t a) const noexcept { return static_cast<size_t>(a); }
  };
  // Live allocations by address, one table per address class (address_key.h): a key of the
  // address alone keeps each slot (key, record, generation, distance) within one cache line.
  using LiveRecords = LiveTable<uint64_t, LiveRecord, AddressHash>;
  std::array<LiveRecords, kAddressClasses> live_;
  LiveRecords torch_live_;  // tensor blocks by address
  Summary summary_;
  std::vector<FailureEvent> failures_;
  std::unordered_map<int32_t, std::pair<uint64_t, uint64_t>> meminfo_;  // device -> free, total
  uint64_t live_device_bytes_ = 0;
  uint64_t last_time_ns_ = 0;   // seen_time's
  uint64_t last_event_ns_ = 0;  // at()'s: the latest event
};

}  // namespace gpumemshim::analyzer

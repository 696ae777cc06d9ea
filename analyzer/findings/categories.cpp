#include "findings/categories.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "report/analysis.h"
#include "report/stack_view.h"

namespace gpumemshim::analyzer {

namespace {

// Which tag wins when a block gets several: the longer-lived role.
int rank_of(uint8_t code) {
  switch (static_cast<format::TensorCategory>(code)) {
    case format::TensorCategory::kParameter:
      return 4;
    case format::TensorCategory::kOptimizerState:
      return 3;
    case format::TensorCategory::kGradient:
      return 2;
    case format::TensorCategory::kActivation:
      return 1;
  }
  return 0;
}

void move_bytes(CategoryTracker::Kinds& kinds, size_t from, size_t to, uint64_t size) {
  kinds[from] -= std::min(kinds[from], size);
  kinds[to] += size;
}

// Which of two moments is higher: more device memory, then more of it in tensors, then in segments.
bool higher(const CategoryTracker::Snapshot& a, const CategoryTracker::Snapshot& b) {
  if (!b.taken) return a.taken;
  if (!a.taken) return false;
  return std::tie(a.device_bytes, a.allocated, a.reserved) >
         std::tie(b.device_bytes, b.allocated, b.reserved);
}

}  // namespace

// ---- The tracker ----

void CategoryTracker::tag(int32_t device, uint64_t size, BlockCategory& b, uint8_t category) {
  ++tags_;
  tagged_ = true;
  if (category == 0 || category > format::kTensorCategoryMax) return;  // a later writer's
  const uint8_t current = code_of(b);
  if (rank_of(category) <= rank_of(current)) return;
  recategorize(device, size, b.born, kind_of(current), static_cast<size_t>(category - 1));
  b.category = category;  // no longer a candidate either
}

size_t CategoryTracker::confirm(int32_t device, uint64_t size, BlockCategory b) {
  recategorize(device, size, b.born, kTemporary, kActivation);
  return kActivation;
}

void CategoryTracker::recategorize(int32_t device, uint64_t size, uint32_t born, size_t from,
                                   size_t to) {
  move_bytes(kinds_, from, to, size);
  auto move = [&](Snapshot& s) {
    if (s.taken && born <= s.ordinal) move_bytes(s.blocks, from, to, size);
  };
  move(peak_);
  move(window_.best);
  for (Oom& o : ooms_)
    if (o.device == device) move(o.at);
  // The closed windows from the first one taken after the birth: their ordinals only grow.
  auto first = std::lower_bound(windows_.begin(), windows_.end(), born,
                                [](const Window& w, uint32_t b) { return w.best.ordinal < b; });
  if (first == windows_.end()) return;
  const auto delta = static_cast<__int128>(size);
  Moves& begin = moves_[static_cast<size_t>(first - windows_.begin())];
  Moves& end = moves_[windows_.size()];
  begin[from] -= delta;
  begin[to] += delta;
  end[from] += delta;
  end[to] -= delta;
}

void CategoryTracker::take(Snapshot& s, uint64_t time_ns, uint64_t live,
                           const DeviceTracker& devices) {
  s.taken = true;
  s.time_ns = time_ns;
  s.ordinal = next_ordinal();
  s.device_bytes = live;
  s.allocated = allocated_;
  s.blocks = kinds_;
  s.reserved = 0;
  s.has_untracked = false;
  s.untracked = 0;
  for (const DeviceMemoryTrack& d : devices.all()) {
    if (!d.seen) continue;
    s.reserved += d.reserved;
    if (d.has_meminfo) {
      s.has_untracked = true;
      s.untracked += d.untracked_at_meminfo;
    }
  }
}

void CategoryTracker::oom(uint64_t time_ns, int32_t device, uint64_t requested, bool torch,
                          bool has_device_free, uint64_t device_free, const Kinds& device_kinds,
                          uint64_t device_allocated, uint64_t in_pass, const DeviceTracker& devices) {
  if (ooms_.size() >= kMaxOoms) return;
  Oom o{device, requested, torch, has_device_free, device_free, {}, in_pass};
  Snapshot& s = o.at;
  s.taken = true;
  s.time_ns = time_ns;
  s.ordinal = next_ordinal();
  s.blocks = device_kinds;
  s.allocated = device_allocated;
  const std::vector<DeviceMemoryTrack>& all = devices.all();
  if (device >= 0 && static_cast<size_t>(device) < all.size() &&
      all[static_cast<size_t>(device)].seen) {
    const DeviceMemoryTrack& d = all[static_cast<size_t>(device)];
    s.device_bytes = d.live_device_bytes;
    s.reserved = d.reserved;
    s.has_untracked = d.has_meminfo;
    s.untracked = d.untracked_at_meminfo;
  }
  ooms_.push_back(o);
}

void CategoryTracker::step(uint64_t time_ns, uint64_t live, const DeviceTracker& devices) {
  if (!basis_steps_) {
    // Time windows until the first step marker: their highest point is the first step's window.
    resolve_moves();
    Snapshot best = window_.best;
    for (const Window& w : windows_)
      if (higher(w.best, best)) best = w.best;
    windows_.clear();
    moves_.assign(1, Moves{});
    basis_steps_ = true;
    width_ = 1;
    window_ = Window{0, 0, 0, best};
    if (!window_.best.taken) take(window_.best, time_ns, live, devices);
  }
  ++steps_;
  if (backward_depth_ == 0) start_forward();
  if (steps_ % width_ != 0) {
    window_.last = steps_;
    return;
  }
  close_window();
  open_window(steps_ / width_, steps_, time_ns, live, devices);
}

void CategoryTracker::close_window() {
  windows_.push_back(window_);
  moves_.emplace_back();
  window_ = Window{};
  if (windows_.size() >= kMaxCategoryWindows) merge_windows();
}

void CategoryTracker::open_window(uint64_t index, uint64_t first, uint64_t time_ns, uint64_t live,
                                  const DeviceTracker& devices) {
  window_ = Window{index, first, first, {}};
  if (!windows_.empty() && windows_.back().index == index) {  // a merge put it there already
    resolve_moves();
    window_ = windows_.back();
    windows_.pop_back();
    moves_.pop_back();
  }
  if (better(window_.best, live, devices)) take(window_.best, time_ns, live, devices);
}

void CategoryTracker::next_time_window(uint64_t time_ns, uint64_t live,
                                       const DeviceTracker& devices) {
  if (window_.best.taken) close_window();
  const uint64_t index = time_ns / width_;
  open_window(index, index * width_, time_ns, live, devices);
  window_.last = (index + 1) * width_;
  window_end_ns_ = (window_.index + 1) * width_;
}

void CategoryTracker::resolve_moves() {
  Moves running{};
  for (size_t i = 0; i < windows_.size(); ++i) {
    Kinds& blocks = windows_[i].best.blocks;
    for (size_t k = 0; k < kKinds; ++k) {
      running[k] += moves_[i][k];
      const __int128 v = static_cast<__int128>(blocks[k]) + running[k];
      blocks[k] = static_cast<uint64_t>(std::clamp<__int128>(v, 0, UINT64_MAX));
    }
  }
  moves_.assign(windows_.size() + 1, Moves{});
}

void CategoryTracker::merge_windows() {
  resolve_moves();
  std::vector<Window> merged;
  merged.reserve(windows_.size() / 2 + 1);
  for (Window& w : windows_) {
    w.index /= 2;
    if (!merged.empty() && merged.back().index == w.index) {
      Window& m = merged.back();
      m.last = w.last;
      if (higher(w.best, m.best)) m.best = w.best;
    } else {
      merged.push_back(w);
    }
  }
  windows_ = std::move(merged);
  moves_.assign(windows_.size() + 1, Moves{});
  width_ *= 2;  // the next window opened (open_window) is at the new width
}

void CategoryTracker::finish() {
  if (window_.best.taken) {
    windows_.push_back(window_);
    moves_.emplace_back();
    window_ = Window{};
  }
  resolve_moves();
  at_peak_.insert(at_peak_.end(), died_after_peak_.begin(), died_after_peak_.end());
  died_after_peak_.clear();
}

// ---- The report's values ----

std::string_view memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParameter:
      return "parameter";
    case MemoryCategory::kGradient:
      return "gradient";
    case MemoryCategory::kOptimizerState:
      return "optimizer_state";
    case MemoryCategory::kActivation:
      return "activation";
    case MemoryCategory::kTemporary:
      return "temporary";
    case MemoryCategory::kAllocatorCache:
      return "allocator_cache";
    case MemoryCategory::kOutsideTorch:
      return "outside_torch";
  }
  return "unknown";
}

uint64_t CategoryBytes::total() const {
  uint64_t sum = 0;
  for (uint64_t b : bytes) sum += b;
  return sum;
}

namespace {

// The device's total: its Device record, else the last cudaMemGetInfo sample's (0: unknown).
uint64_t device_total(const LoadedTrace& trace, int32_t device) {
  for (const DeviceInfo& d : trace.devices)
    if (d.device == device && d.total_bytes) return d.total_bytes;
  for (const DeviceMemoryTrack& d : trace.replay.devices().all())
    if (d.seen && d.device == device && d.has_meminfo) return d.meminfo_total;
  return 0;
}

CategoryBytes bytes_of(const CategoryTracker::Snapshot& s) {
  CategoryBytes c;
  c.time_ns = s.time_ns;
  for (size_t k = 0; k < CategoryTracker::kKinds; ++k) c.bytes[k] = s.blocks[k];
  c.bytes[static_cast<size_t>(MemoryCategory::kAllocatorCache)] =
      s.reserved > s.allocated ? s.reserved - s.allocated : 0;
  c.bytes[static_cast<size_t>(MemoryCategory::kOutsideTorch)] =
      s.device_bytes > s.reserved ? s.device_bytes - s.reserved : 0;
  c.has_not_explained = s.has_untracked;
  c.not_explained = s.untracked;
  return c;
}

// Blocks by kind and site (raw sites that symbolize alike merged), the largest kMaxCategorySites
// of each kind.
std::vector<CategorySite> merged_sites(const std::vector<CategoryTracker::SiteKind>& blocks,
                                       const LoadedTrace& trace, StackView& stacks) {
  const std::vector<RawSite>& raw = trace.replay.sites();
  // (kind, site id) -> bytes, over raw sites that symbolize alike.
  std::map<std::pair<size_t, std::string>, CategorySite> merged;
  for (const CategoryTracker::SiteKind& s : blocks) {
    if (s.site >= raw.size() || s.bytes == 0) continue;
    const RawSite& r = raw[s.site];
    std::string id = site_id_of(stacks.stable_key(r.stack_id), Api::kUnknown, true);
    auto [it, inserted] = merged.try_emplace({s.kind, id});
    if (inserted) {
      it->second.category = static_cast<MemoryCategory>(s.kind);
      it->second.id = std::move(id);
      it->second.stack = stacks.frames(r.stack_id);
    }
    it->second.bytes += s.bytes;
  }
  std::vector<CategorySite> all;
  for (auto& [key, site] : merged) all.push_back(std::move(site));
  std::stable_sort(all.begin(), all.end(), [](const CategorySite& a, const CategorySite& b) {
    return a.category != b.category ? a.category < b.category : a.bytes > b.bytes;
  });
  std::vector<CategorySite> out;
  size_t in_category = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    in_category = i > 0 && all[i].category == all[i - 1].category ? in_category + 1 : 0;
    if (in_category < kMaxCategorySites) out.push_back(std::move(all[i]));
  }
  return out;
}

}  // namespace

std::optional<MemoryCategories> find_categories(const LoadedTrace& trace, StackView& stacks) {
  if (trace.replay.summary().torch.events == 0) return std::nullopt;
  const CategoryTracker& t = trace.replay.categories();
  MemoryCategories m;
  m.tagged = t.tagged();
  m.tags = t.tags();
  m.unmatched_tags = t.unmatched_tags();
  m.peak = bytes_of(t.peak());
  m.peak_sites = merged_sites(t.at_peak(), trace, stacks);
  m.kept_sites = merged_sites(t.kept_over_run(), trace, stacks);
  // On a device whose allocator said it ran out, its OOM says more than the cudaMalloc under it.
  std::vector<int32_t> torch_oom_devices;
  for (const CategoryTracker::Oom& o : t.ooms())
    if (o.torch) torch_oom_devices.push_back(o.device);
  for (const CategoryTracker::Oom& o : t.ooms()) {
    if (!o.torch && std::find(torch_oom_devices.begin(), torch_oom_devices.end(), o.device) !=
                        torch_oom_devices.end())
      continue;
    CategoryOom c{o.device, o.requested, o.torch, bytes_of(o.at), o.in_pass};
    const uint64_t total = device_total(trace, o.device);
    if (o.has_device_free && total >= o.device_free) {  // exact: the device's own answer then
      const uint64_t used = total - o.device_free;
      c.at.has_not_explained = true;
      c.at.not_explained = used > o.at.device_bytes ? used - o.at.device_bytes : 0;
    }
    m.ooms.push_back(std::move(c));
  }
  m.basis = t.basis_steps() ? "steps" : "time";
  for (const CategoryTracker::Window& w : t.windows())
    if (w.best.taken) m.windows.push_back(CategoryWindow{w.first, w.last, bytes_of(w.best)});
  return m;
}

}  // namespace gpumemshim::analyzer

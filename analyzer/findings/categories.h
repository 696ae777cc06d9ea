// Memory by category (report.h, MemoryCategory): what each live tensor block is to training, the
// caching allocator's cache and the device memory outside it, at the device-memory peak, at each
// OOM and at the highest point of each step. Fed by the replay's core.
//
// A block's category belongs to the block for its whole life: a tag (the Python package's, at
// optimizer construction, after each backward pass and each optimizer step) often comes after the
// moments it matters for (parameters are allocated long before the first step that tells them).
// So every moment kept (a snapshot) carries the ordinal of the births it has seen, and a block
// whose category changes moves its bytes in every snapshot taken while it lived: directly in the
// few live ones (the peak, the open window, the OOMs), through a difference array in the closed
// windows. A snapshot is never copied again after its moment.
//
// Activations are not tagged (saved-tensor hooks installed for the whole program would change it):
// a block allocated since the last step or backward pass (the forward of this backward: its birth
// ordinal is at least the forward's start), untagged and alive when a backward pass starts (the
// package's "torch.backward" range) is a candidate; it is an activation once it is freed before the
// next backward pass starts, and stays a temporary when it outlives that (a buffer, a bucket or a
// cache made during the forward, not a per-pass tensor). One pass over the live blocks per backward
// pass finds both, so an allocation costs nothing more for them.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "findings/devices.h"

namespace gpumemshim::analyzer {

// What the replay keeps with a live tensor block for its category.
struct BlockCategory {
  uint32_t born = 0;     // CategoryTracker's birth ordinal
  uint8_t category = 0;  // low bits: a format::TensorCategory (0: none told), kPending: a candidate
  static constexpr uint8_t kPending = 0x80;
  // A candidate that outlived the backward pass after its forward pass: what an autograd graph
  // kept past its step holds (its saved activations), or a forward pass's outputs kept.
  static constexpr uint8_t kKept = 0x40;
  static constexpr uint8_t kCodeMask = 0x07;
};

class CategoryTracker {
 public:
  // The tensor categories, as CategoryBytes indexes (MemoryCategory's first five).
  static constexpr size_t kKinds = 5;
  static constexpr size_t kActivation = 3, kTemporary = 4;
  static constexpr size_t kMaxOoms = 64;
  static constexpr uint64_t kFirstTimeWindowNs = 10'000'000;

  using Kinds = std::array<uint64_t, kKinds>;
  struct Snapshot {
    bool taken = false;
    uint64_t time_ns = 0;
    uint32_t ordinal = 0;        // blocks born at or before it were alive then
    uint64_t device_bytes = 0;   // live device memory the trace saw
    uint64_t allocated = 0;      // live tensor blocks
    uint64_t reserved = 0;       // PyTorch's segments
    Kinds blocks{};              // tensor blocks by kind
    bool has_untracked = false;  // the last cudaMemGetInfo samples: device used beyond the above
    uint64_t untracked = 0;
  };
  struct Window {
    uint64_t index = 0;  // at the current width: steps / width, or time / width
    uint64_t first = 0, last = 0;
    Snapshot best;
  };
  struct Oom {
    int32_t device = 0;
    uint64_t requested = 0;
    bool torch = false;
    bool has_device_free = false;
    uint64_t device_free = 0;
    Snapshot at;           // of that device
    uint64_t in_pass = 0;  // of its temporaries, the pass in progress's (in_pass())
  };
  // Bytes of one kind held by one raw site at the peak.
  struct SiteKind {
    uint32_t site = 0;
    uint8_t kind = 0;
    uint64_t bytes = 0;
  };

  // ---- The tensor blocks (the core's torch_alloc, torch_free and tag events) ----
  [[gnu::always_inline]] BlockCategory block_alloc(uint64_t size) {
    kinds_[kTemporary] += size;
    allocated_ += size;
    born_since_snapshot_ = true;
    return BlockCategory{ordinal_, 0};
  }
  void block_free(int32_t device, uint64_t size, BlockCategory b, uint32_t site) {
    size_t kind = kind_of(b.category);
    if (b.category & BlockCategory::kPending) [[unlikely]]
      kind = confirm(device, size, b);
    kinds_[kind] -= std::min(kinds_[kind], size);
    allocated_ -= std::min(allocated_, size);
    if (peak_.taken && b.born <= peak_.ordinal)
      died_after_peak_.push_back(SiteKind{site, static_cast<uint8_t>(kind), size});
  }
  // A tag for a live block (its record's category is updated). A category outranks the ones below
  // it (parameter, optimizer state, gradient, activation): a parameter saved for backward stays a
  // parameter.
  void tag(int32_t device, uint64_t size, BlockCategory& b, uint8_t category);
  void unmatched_tag() {
    ++tags_;
    ++unmatched_tags_;
    tagged_ = true;
  }

  // ---- Moments ----
  // After an event that raised device memory, tensor blocks or PyTorch's segments: `live` is the
  // process's live device bytes.
  [[gnu::always_inline]] void point(uint64_t time_ns, uint64_t live, const DeviceTracker& devices) {
    if (basis_steps_ == false && time_ns >= window_end_ns_) [[unlikely]]
      next_time_window(time_ns, live, devices);
    if (better(peak_, live, devices)) [[unlikely]] {
      take(peak_, time_ns, live, devices);
      died_after_peak_.clear();
    }
    if (better(window_.best, live, devices)) [[unlikely]]
      take(window_.best, time_ns, live, devices);
  }
  void step(uint64_t time_ns, uint64_t live, const DeviceTracker& devices);
  // An OOM; device_kinds and device_allocated: the device's live tensor blocks by kind.
  void oom(uint64_t time_ns, int32_t device, uint64_t requested, bool torch, bool has_device_free,
           uint64_t device_free, const Kinds& device_kinds, uint64_t device_allocated,
           uint64_t in_pass, const DeviceTracker& devices);
  // Whether a live block belongs to the forward or backward pass in progress as far as the trace
  // can tell yet: untagged and born in the open forward pass, or a candidate a backward pass has
  // not freed yet. An OOM in the middle of a pass stops it before its activations are confirmed.
  bool in_pass(BlockCategory b) const {
    if (b.category & BlockCategory::kPending) return backward_depth_ != 0;
    return forward_open_ && backward_depth_ == 0 && b.category == 0 && b.born >= forward_start_;
  }
  // A "torch.backward" range opens: the candidates of the last one that are still alive stay
  // temporaries, and this forward's blocks that are untagged and alive become candidates.
  // for_each_live(f): f(BlockCategory&, site, size) for every live tensor block.
  template <typename ForEachLive>
  void backward_begins(ForEachLive&& for_each_live) {
    tagged_ = true;
    if (backward_depth_++ != 0) return;
    const bool forward = forward_open_;
    const uint32_t start = forward_start_;
    for_each_live([&](BlockCategory& b, uint32_t site, uint64_t size) {
      if (b.category & BlockCategory::kPending) {
        b.category =
            static_cast<uint8_t>((b.category & ~BlockCategory::kPending) | BlockCategory::kKept);
        if (site >= kept_bytes_.size()) kept_bytes_.resize(site + 1, 0);
        kept_bytes_[site] += size;
      } else if (forward && b.category == 0 && b.born >= start)
        b.category = BlockCategory::kPending;
    });
    forward_open_ = false;
  }
  void backward_ends() {
    if (backward_depth_ != 0 && --backward_depth_ == 0) start_forward();
  }

  // ---- The end ----
  // Each block alive at the end, then finish().
  void live_at_end(uint32_t site, uint64_t size, BlockCategory b) {
    if (peak_.taken && b.born <= peak_.ordinal)
      at_peak_.push_back(SiteKind{site, static_cast<uint8_t>(kind_of(b.category)), size});
  }
  void finish();

  // ---- What the finding reads (after finish) ----
  bool tagged() const { return tagged_; }
  uint64_t tags() const { return tags_; }
  uint64_t unmatched_tags() const { return unmatched_tags_; }
  const Snapshot& peak() const { return peak_; }
  const std::vector<Oom>& ooms() const { return ooms_; }
  bool basis_steps() const { return basis_steps_; }
  const std::vector<Window>& windows() const { return windows_; }
  // Every (site, kind) alive at the peak, in no order, a pair possibly several times.
  const std::vector<SiteKind>& at_peak() const { return at_peak_; }
  // Per site, the bytes of every block that outlived the backward pass after its forward, over
  // the whole run: a graph kept by a local list is freed when its function returns, before the end.
  std::vector<SiteKind> kept_over_run() const {
    std::vector<SiteKind> out;
    for (uint32_t s = 0; s < kept_bytes_.size(); ++s)
      if (kept_bytes_[s]) out.push_back(SiteKind{s, kTemporary, kept_bytes_[s]});
    return out;
  }
  // The category of a live block's record as a format::TensorCategory (0: a temporary; an
  // unconfirmed candidate is one).
  static uint8_t code_of(BlockCategory b) { return b.category & BlockCategory::kCodeMask; }
  static size_t kind_of(uint8_t category) {
    const uint8_t code = category & BlockCategory::kCodeMask;
    return code == 0 ? kTemporary : static_cast<size_t>(code - 1);
  }

 private:
  // Signed bytes moved between kinds, summed over many blocks: 128 bits, so that sizes near 2^64
  // (a damaged trace's) neither wrap nor overflow.
  using Moves = std::array<__int128, kKinds>;

  // A candidate freed before the next backward pass: an activation from its birth on.
  size_t confirm(int32_t device, uint64_t size, BlockCategory b);
  // The block's bytes change kind now and in every snapshot taken while it lived.
  void recategorize(int32_t device, uint64_t size, uint32_t born, size_t from, size_t to);

  bool better(const Snapshot& s, uint64_t live, const DeviceTracker& devices) const {
    if (!s.taken) return true;
    if (live != s.device_bytes) return live > s.device_bytes;
    if (allocated_ != s.allocated) return allocated_ > s.allocated;
    return devices.reserved_bytes() > s.reserved;
  }
  void take(Snapshot& s, uint64_t time_ns, uint64_t live, const DeviceTracker& devices);
  // Blocks born from now on are after every snapshot taken so far.
  uint32_t next_ordinal() {
    if (!born_since_snapshot_) return ordinal_ - 1;
    born_since_snapshot_ = false;
    return ordinal_++;
  }
  // A forward starts: blocks born from now on are after every block born so far.
  void start_forward() {
    if (born_since_snapshot_) {
      ++ordinal_;
      born_since_snapshot_ = false;
    }
    forward_start_ = ordinal_;
    forward_open_ = true;
  }
  void close_window();  // no window is open after it
  void open_window(uint64_t index, uint64_t first, uint64_t time_ns, uint64_t live,
                   const DeviceTracker& devices);
  void next_time_window(uint64_t time_ns, uint64_t live, const DeviceTracker& devices);
  void resolve_moves();  // the difference array into the closed windows
  void merge_windows();  // twice the width, half the windows

  // Live tensor blocks by kind.
  Kinds kinds_{};
  uint64_t allocated_ = 0;
  // Births and snapshots.
  uint32_t ordinal_ = 0;
  bool born_since_snapshot_ = true;
  Snapshot peak_;
  std::vector<SiteKind> died_after_peak_;  // blocks alive at the peak freed since
  std::vector<uint64_t> kept_bytes_;       // by raw site
  std::vector<SiteKind> at_peak_;          // finish(): every block alive at the peak
  std::vector<Oom> ooms_;
  // Windows: the open one, the closed ones, the moves still to apply to them (moves_[i] applies to
  // windows i and after; one more entry than windows).
  bool basis_steps_ = false;
  uint64_t width_ = kFirstTimeWindowNs;  // steps or ns per window
  uint64_t window_end_ns_ = 0;           // basis time: the open window's end
  uint64_t steps_ = 0;
  Window window_;
  std::vector<Window> windows_;
  std::vector<Moves> moves_ = std::vector<Moves>(1);
  // Backward passes.
  uint32_t backward_depth_ = 0;
  bool forward_open_ = true;    // since the last step or backward pass, no backward pass began
  uint32_t forward_start_ = 0;  // the birth ordinal of its first block
  // Tags.
  bool tagged_ = false;
  uint64_t tags_ = 0, unmatched_tags_ = 0;
};

}  // namespace gpumemshim::analyzer

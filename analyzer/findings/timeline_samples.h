// Memory over time, sampled during the replay itself (one pass over the trace): per time bucket the
// lowest and the highest point of (live device bytes, torch allocated bytes), each with every raw
// site's live bytes at that moment, so a downsampled chart still shows the true peak and the
// troughs between steps, split by site.
//
// The trace's length is not known while it is read: buckets start fine and double in width (two
// neighbours merge: the lower low and the higher high survive, exactly as if the wider bucket had
// been sampled) whenever more than kMaxBuckets exist. The sites' bytes at a bucket's low and high
// are not copied at each new extreme (that would cost O(sites) per event) but rebuilt when the
// bucket closes, from the bucket's first state and a journal of the site changes made in it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpumemshim::analyzer {

struct SampledPoint {
  uint64_t seq = 0;  // the event's order among sampled events
  uint64_t time_ns = 0;
  uint64_t live_bytes = 0;
  uint64_t reserved_bytes = 0;
  uint64_t allocated_bytes = 0;
  // Every raw site's live bytes then, in one of two forms: the non-zero ones as (site, bytes), or,
  // when most sites hold bytes, every site's by site number (half the memory, and a copy to make
  // instead of a walk: a timeline captures thousands of points, most merged away later).
  std::vector<std::pair<uint32_t, uint64_t>> sites;
  std::vector<uint64_t> dense;
  // f(site, bytes) for each site holding bytes, by increasing site.
  template <typename F>
  void for_each_site(F&& f) const {
    for (const auto& [site, bytes] : sites) f(site, bytes);
    for (size_t site = 0; site < dense.size(); ++site)
      if (dense[site] != 0) f(static_cast<uint32_t>(site), dense[site]);
  }
};

// One bucket's extremes (by live bytes, then allocated bytes; the first such moment of each).
struct SampledBucket {
  uint64_t index = 0;  // time / width
  SampledPoint low, high;
  bool same() const { return low.seq == high.seq; }
  // Two buckets of the same index (the later one `b`) become one.
  void merge(SampledBucket&& b);
};

// Buckets of twice the width: neighbours (index / 2 alike) merged, in time order.
void halve_buckets(std::vector<SampledBucket>& buckets);

class TimelineSampler {
 public:
  static constexpr size_t kMaxBuckets = 999;  // two samples each, with the first and last: 2000
  static constexpr unsigned kFirstWidthShift = 14;  // 16 µs
  static constexpr uint64_t kFirstWidthNs = uint64_t{1} << kFirstWidthShift;

  // Raw sites 0 .. count-1 may change from now on (the replay tells it each new site).
  void sites(size_t count) { site_count_ = count; }
  // A raw site's live bytes are now `bytes` (call before point() of the same event); the site is
  // below the count given to sites().
  void site_changed(uint32_t site, uint64_t bytes) { journal_.emplace_back(site, bytes); }
  // The state after an event that changed device or allocator bytes.
  // Compared as scalars: a Mark is made only for a new low or high (most points are neither).
  void point(uint64_t time_ns, uint64_t live, uint64_t reserved, uint64_t allocated) {
    const uint64_t seq = seq_++;
    // Outside the open bucket (none open: a width of 0), by one wrapping comparison.
    if (time_ns - bucket_start_ >= bucket_width_) [[unlikely]] {
      next_bucket(Mark{journal_.size(), time_ns, live, reserved, allocated, seq});
      return;
    }
    if (live < low_.live || (live == low_.live && allocated < low_.allocated))
      low_ = Mark{journal_.size(), time_ns, live, reserved, allocated, seq};
    if (live > high_.live || (live == high_.live && allocated > high_.allocated))
      high_ = Mark{journal_.size(), time_ns, live, reserved, allocated, seq};
  }
  // Closes the last bucket; the buckets then stay as they are.
  void finish();

  // In time order; every bucket is `width_ns()` wide.
  const std::vector<SampledBucket>& buckets() const { return buckets_; }
  uint64_t width_ns() const { return uint64_t{1} << shift_; }
  bool any() const { return !buckets_.empty(); }

 private:
  struct Mark {
    size_t journal_pos = 0;  // the journal's length right after the event
    uint64_t time_ns = 0, live = 0, reserved = 0, allocated = 0;
    uint64_t seq = 0;
  };
  void next_bucket(const Mark& first);  // closes the open one; `first` is the new one's low and high
  void close_bucket();
  SampledPoint capture(const Mark& m);
  void widen();

  std::vector<SampledBucket> buckets_;  // closed ones
  uint64_t index_ = 0;                  // of the open one
  uint64_t bucket_start_ = 0, bucket_width_ = 0;  // the open one's times (width 0: none open)
  Mark low_, high_;
  size_t site_count_ = 0;  // sites()
  uint64_t seq_ = 0;
  unsigned shift_ = kFirstWidthShift;  // bucket width: 1 << shift_ ns
  std::vector<uint64_t> base_;  // every raw site's bytes when the open bucket began
  std::vector<std::pair<uint32_t, uint64_t>> journal_;  // site changes since then
  std::vector<uint64_t> nonzero_;  // a bit per site of base_: whether it holds bytes
};

}  // namespace gpumemshim::analyzer

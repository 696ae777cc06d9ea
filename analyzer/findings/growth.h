// Growth: live bytes per allocation site sampled at step boundaries (or, without step markers, at
// the ends of windows of allocations: growth_windows.h), and a robust trend fit per site.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

// Live bytes per raw site (an index the replay hands out) at numbered boundaries 1, 2, 3, ...
// A boundary writes the sites whose bytes differ from the value they last wrote. It finds them one
// of two ways, whichever the last boundary showed cheaper: when few sites change between
// boundaries, the caller touches each site it changes and only those are read, so sampling costs
// O(events), not O(sites x boundaries); when the caller changed sites at least half as many times
// as there are sites since the last boundary, touching would cost more than comparing every site,
// so the sampler stops asking for touches (wants_touches) and compares instead. Memory stays bounded: once more than max_points
// boundaries exist, only every k-th is kept (k doubles), so a site holds at most max_points
// values however long the run. The values are kept in one log in boundary order (a boundary
// appends to the end: one sequential write per site, where a vector per site cost two cache
// misses each), read by for_each_value in one pass.
class SiteSampler {
 public:
  explicit SiteSampler(uint64_t max_points) : max_points_(max_points) {}
  // Whether boundary() needs touch() for every site changed since the previous boundary (else it
  // compares every site's bytes).
  bool wants_touches() const { return !scan_; }
  // The site's live bytes changed since the last boundary (ignored while !wants_touches()).
  void touch(uint32_t site) {
    if (scan_) return;
    if (site >= dirty_flag_.size()) dirty_flag_.resize(site + 1, 0);
    if (!dirty_flag_[site]) {
      dirty_flag_[site] = 1;
      dirty_.push_back(site);
    }
  }
  // Boundary `index` (increasing, from 1) is reached: live_by_site holds every site's bytes now,
  // changes_so_far counts the caller's changes of any site's bytes so far (for the choice between
  // touches and comparing; 0 keeps asking for touches).
  void boundary(uint64_t index, const std::vector<uint64_t>& live_by_site,
                uint64_t changes_so_far = 0);
  uint64_t last_boundary() const { return last_; }
  uint64_t stride() const { return k_; }
  // The boundaries kept (every stride-th, and the last one), increasing.
  std::vector<uint64_t> points() const;
  // How many points() there are.
  size_t point_count() const { return static_cast<size_t>(last_ / k_ + (last_ % k_ ? 1 : 0)); }
  // A site's live bytes at each of points() (0 before it was first sampled); a scan of the log.
  std::vector<uint64_t> series(uint32_t site) const;
  // Every value in the order of the log (by point): f(site, point, bytes) says the site holds
  // bytes from points()[point] on, until its next value (a later value at the same point replaces
  // it). One sequential pass for all sites, where series() per site reads values lying far apart.
  template <typename F>
  void for_each_value(F&& f) const;
  // One more than the highest site sampled.
  size_t sites() const { return sites_; }

 private:
  struct Entry {
    uint64_t bytes;
    uint32_t site;
    uint32_t group;  // tags_[group]: the first kept boundary at which this value holds
  };
  static constexpr uint32_t kNoEntry = UINT32_MAX;
  void thin(uint64_t new_stride);
  void write(uint32_t site, uint64_t bytes, uint64_t tag);  // the site's value at this boundary
  // The first point a value tagged `tag` holds at: points()[i] shows the values tagged up to
  // (i + 1) * stride (the last boundary: up to the next multiple).
  uint64_t point_of(uint64_t tag) const { return tag == 0 ? 0 : (tag - 1) / k_; }

  uint64_t max_points_;
  uint64_t k_ = 1;
  uint64_t last_ = 0;
  std::vector<uint32_t> dirty_;
  std::vector<uint8_t> dirty_flag_;
  std::vector<uint64_t> tags_;       // increasing
  std::vector<Entry> log_;           // by group; a site at most once per group
  std::vector<uint32_t> last_entry_; // by site: its latest entry in log_ (kNoEntry: none)
  std::vector<uint64_t> last_value_;  // by site: the value its series shows now (0: none yet)
  bool scan_ = false;                 // the next boundary compares every site (wants_touches)
  uint64_t changes_at_last_ = 0;      // changes_so_far at the last boundary
  size_t sites_ = 0;
};

template <typename F>
void SiteSampler::for_each_value(F&& f) const {
  const size_t n_points = point_count();
  std::vector<uint64_t> point_of_group(tags_.size());  // a divide per group, not per value
  for (size_t g = 0; g < tags_.size(); ++g) point_of_group[g] = point_of(tags_[g]);
  for (const Entry& e : log_)
    if (const uint64_t point = point_of_group[e.group]; point < n_points)
      f(e.site, static_cast<size_t>(point), e.bytes);
}

// One growth fit: x = boundary indices, y = live bytes.
struct TrendFit {
  double slope = 0;        // bytes per boundary (Theil–Sen)
  double intercept = 0;
  double confidence = 0;   // share of fitted points within two boundaries' growth of the line
  size_t points = 0;       // points used (after warm-up)
  size_t warmup = 0;       // points excluded at the start
  uint64_t first_bytes = 0;
  uint64_t last_bytes = 0;
};

// The median of the pairwise slopes (y[j] - y[i]) / (x[j] - x[i]) over i < j with x[j] > x[i]: the
// one std::nth_element leaves at the middle (index count / 2) of them all. nullopt without such a
// pair. Found by selection on exact integers where the points allow (see growth.cpp), else by
// listing every pair.
std::optional<double> median_pairwise_slope(const std::vector<double>& x,
                                            const std::vector<double>& y);
// The same by listing every pair (O(n^2)): the fallback, and the reference the tests compare with.
std::optional<double> median_pairwise_slope_all_pairs(const std::vector<double>& x,
                                                      const std::vector<double>& y);

// Theil–Sen slope (median of pairwise slopes, at most 256 evenly spaced points) over the points
// after the warm-up (the first 10%, at least 1). Fewer than 4 points left: points == 0.
TrendFit fit_trend(const std::vector<uint64_t>& x, const std::vector<uint64_t>& y);
// The points fit_trend leaves out at the start of n (the first 10%, at least 1).
inline size_t trend_warmup(size_t n) { return n / 10 > 1 ? n / 10 : 1; }

// Growth is reported only when the fit rises by at least one byte per boundary and this share of
// its points agree with the line.
inline constexpr double kMinGrowthConfidence = 0.5;
inline constexpr size_t kMaxStepPoints = 512;  // kept step boundaries

}  // namespace gpumemshim::analyzer

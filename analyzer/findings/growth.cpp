// Growth: the sampler behind it and the robust trend fit.
#include "findings/growth.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace gpumemshim::analyzer {

namespace {
uint64_t round_up(uint64_t v, uint64_t k) { return (v + k - 1) / k * k; }
}  // namespace

void SiteSampler::boundary(uint64_t index, const std::vector<uint64_t>& live_by_site,
                           uint64_t changes_so_far) {
  if (index <= last_) return;
  last_ = index;
  const uint64_t changes = changes_so_far - std::min(changes_so_far, changes_at_last_);
  changes_at_last_ = changes_so_far;
  const uint64_t tag = round_up(index, k_);
  // A site whose bytes equal its last value writes nothing: its series already shows them.
  if (scan_) {
    sites_ = std::max(sites_, live_by_site.size());
    if (last_value_.size() < sites_) last_value_.resize(sites_, 0);
    for (size_t site = 0; site < live_by_site.size(); ++site) {
      if (live_by_site[site] == last_value_[site]) continue;
      write(static_cast<uint32_t>(site), live_by_site[site], tag);
    }
  } else {
    for (uint32_t site : dirty_) {
      dirty_flag_[site] = 0;
      if (site >= sites_) {
        sites_ = site + size_t{1};
        last_value_.resize(sites_, 0);
      }
      if (live_by_site[site] != last_value_[site]) write(site, live_by_site[site], tag);
    }
    dirty_.clear();
  }
  // Comparing a site costs less than half of what a touch costs its change (a check on every
  // change, a call for the first of each site): scan when changes come at least half as often.
  scan_ = sites_ > 0 && sites_ <= 2 * changes;
  uint64_t k = k_;
  while (last_ / k > max_points_) k *= 2;
  if (k != k_) thin(k);
}

void SiteSampler::write(uint32_t site, uint64_t bytes, uint64_t tag) {
  last_value_[site] = bytes;
  if (tags_.empty() || tags_.back() != tag) tags_.push_back(tag);
  const auto group = static_cast<uint32_t>(tags_.size() - 1);
  if (site >= last_entry_.size()) last_entry_.resize(sites_, kNoEntry);
  uint32_t& e = last_entry_[site];
  // A value for this tag already: the later one holds.
  if (e != kNoEntry && log_[e].group == group) {
    log_[e].bytes = bytes;
  } else {
    e = static_cast<uint32_t>(log_.size());
    log_.push_back(Entry{bytes, site, group});
  }
}

// A value tagged t holds from kept boundary t on; with a coarser stride it holds from the next
// multiple of the new stride, and of several values landing on one tag the last one wins.
void SiteSampler::thin(uint64_t new_stride) {
  k_ = new_stride;
  std::vector<uint32_t> new_group(tags_.size());
  size_t tags = 0;
  for (size_t g = 0; g < tags_.size(); ++g) {
    uint64_t t = round_up(tags_[g], k_);
    if (tags == 0 || tags_[tags - 1] != t) tags_[tags++] = t;
    new_group[g] = static_cast<uint32_t>(tags - 1);
  }
  tags_.resize(tags);
  std::fill(last_entry_.begin(), last_entry_.end(), kNoEntry);
  size_t out = 0;
  for (size_t i = 0; i < log_.size(); ++i) {
    Entry e = log_[i];
    e.group = new_group[e.group];
    uint32_t& last = last_entry_[e.site];
    if (last != kNoEntry && log_[last].group == e.group) {
      log_[last].bytes = e.bytes;
    } else {
      last = static_cast<uint32_t>(out);
      log_[out++] = e;
    }
  }
  log_.resize(out);
}

std::vector<uint64_t> SiteSampler::points() const {
  std::vector<uint64_t> x;
  for (uint64_t b = k_; b <= last_; b += k_) x.push_back(b);
  if (last_ && (x.empty() || x.back() != last_)) x.push_back(last_);
  return x;
}

std::vector<uint64_t> SiteSampler::series(uint32_t site) const {
  std::vector<uint64_t> x = points();
  std::vector<uint64_t> y(x.size(), 0);
  if (site >= sites_) return y;
  // The site's entries in tag order: a scan of the log (for_each_value reads every site at once).
  std::vector<uint32_t> v;
  for (size_t i = 0; i < log_.size(); ++i)
    if (log_[i].site == site) v.push_back(static_cast<uint32_t>(i));
  const size_t n = v.size();
  size_t j = 0;
  uint64_t value = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    // The last boundary may not be a kept multiple: values tagged up to the next multiple hold.
    uint64_t upto = (i + 1 == x.size()) ? round_up(x[i], k_) : x[i];
    while (j < n && tags_[log_[v[j]].group] <= upto) value = log_[v[j++]].bytes;
    y[i] = value;
  }
  return y;
}

namespace {

double pair_slope(const std::vector<double>& x, const std::vector<double>& y, size_t i, size_t j) {
  return (y[j] - y[i]) / (x[j] - x[i]);
}

// Exact selection (median_pairwise_slope). When every coordinate is an integer below 2^53 and x
// strictly increases, each pair's differences are exact in double, so its computed slope is its
// exact quotient rounded once. Rounding is monotone: the median of the computed slopes is the
// computed slope of a pair whose exact quotient is the median one. That pair is found with integer
// arithmetic: for a pivot slope t = num / den, pair i < j has slope < t exactly when
// y[j] * den - x[j] * num < y[i] * den - x[i] * num, so ordering the points by that key counts the
// pairs below t as inversions (O(n log n)), and the pairs between two pivots are those two orders
// disagree on. A random sample of slopes picks pivots close around the median; should the median
// fall outside them, every pair is listed as before.
constexpr size_t kMinPointsForSelection = 24;  // fewer: listing every pair is as quick
constexpr size_t kPivotSample = 256;           // sampled pair slopes the pivots come from
constexpr size_t kPivotMargin = 28;            // sample ranks either side of the median's (~3.5 sd)

struct ExactPoints {
  std::vector<int64_t> x, y;
};

// The points as integers, when exact and small enough that y * den - x * num fits in int64 for
// any pair's num = dy, den = dx (|key| <= 2 * max x * max y).
bool exact_points(const std::vector<double>& x, const std::vector<double>& y, ExactPoints& p) {
  const size_t n = x.size();
  double max_x = 0, max_y = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!(x[i] >= 0 && x[i] < 0x1p53 && y[i] >= 0 && y[i] < 0x1p53)) return false;
    if (x[i] != std::floor(x[i]) || y[i] != std::floor(y[i])) return false;
    if (i > 0 && !(x[i] > x[i - 1])) return false;
    max_x = std::max(max_x, x[i]);
    max_y = std::max(max_y, y[i]);
  }
  if (max_x * max_y >= 0x1p61) return false;
  p.x.assign(x.begin(), x.end());
  p.y.assign(y.begin(), y.end());
  return true;
}

struct Keyed {
  int64_t key;
  uint32_t point;
};

// Stable bottom-up merge sort by key. For each element that overtakes earlier elements with a
// larger key, calls overtaken(element, first, last) with those elements [first, last).
template <typename F>
void merge_sort(std::vector<Keyed>& v, F&& overtaken) {
  const size_t n = v.size();
  std::vector<Keyed> out(n);
  for (size_t width = 1; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      const size_t mid = std::min(lo + width, n), hi = std::min(lo + 2 * width, n);
      size_t a = lo, b = mid, o = lo;
      while (a < mid && b < hi) {
        if (v[b].key < v[a].key) {
          overtaken(v[b], v.data() + a, v.data() + mid);
          out[o++] = v[b++];
        } else {
          out[o++] = v[a++];
        }
      }
      while (a < mid) out[o++] = v[a++];
      while (b < hi) out[o++] = v[b++];
    }
    v.swap(out);
  }
}

struct Pivot {
  double slope;  // as pair_slope computes it
  int64_t num, den;
};

// The points ordered by y * den - x * num (ties by index), with the pairs below and at the pivot.
struct PivotOrder {
  std::vector<Keyed> order;
  uint64_t below = 0;
  uint64_t tied = 0;
};

PivotOrder order_at(const ExactPoints& p, const Pivot& t) {
  PivotOrder o;
  o.order.resize(p.x.size());
  for (size_t i = 0; i < p.x.size(); ++i)
    o.order[i] = Keyed{p.y[i] * t.den - p.x[i] * t.num, static_cast<uint32_t>(i)};
  merge_sort(o.order, [&](const Keyed&, const Keyed* first, const Keyed* last) {
    o.below += static_cast<uint64_t>(last - first);
  });
  for (size_t i = 0, j = 0; i < o.order.size(); i = j) {
    while (j < o.order.size() && o.order[j].key == o.order[i].key) ++j;
    o.tied += (j - i) * (j - i - 1) / 2;
  }
  return o;
}

// Two pivots from a sample of pair slopes, at sample ranks around the one of rank k of total.
std::pair<Pivot, Pivot> pivots(const std::vector<double>& x, const std::vector<double>& y,
                               const ExactPoints& p, uint64_t k, uint64_t total) {
  struct Sampled {
    double slope;
    uint32_t i, j;
  };
  const size_t n = x.size();
  std::vector<Sampled> sample(kPivotSample);
  uint64_t state = 0x9e3779b97f4a7c15ULL;  // splitmix64: any sequence gives the same result
  auto next = [&] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  for (Sampled& s : sample) {
    const uint64_t r = next();  // two indices by multiply-shift, no division
    size_t i = static_cast<size_t>(((r >> 32) * n) >> 32);
    size_t j = static_cast<size_t>(((r & 0xffffffffULL) * (n - 1)) >> 32);
    if (j >= i) ++j;
    if (j < i) std::swap(i, j);
    s = Sampled{pair_slope(x, y, i, j), static_cast<uint32_t>(i), static_cast<uint32_t>(j)};
  }
  const size_t center = static_cast<size_t>(static_cast<double>(k) / static_cast<double>(total) *
                                            static_cast<double>(kPivotSample));
  const size_t lo_rank = center > kPivotMargin ? center - kPivotMargin : 0;
  const size_t hi_rank = std::min(center + kPivotMargin, kPivotSample - 1);
  auto by_slope = [](const Sampled& a, const Sampled& b) { return a.slope < b.slope; };
  std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(hi_rank),
                   sample.end(), by_slope);
  std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(lo_rank),
                   sample.begin() + static_cast<std::ptrdiff_t>(hi_rank), by_slope);
  auto pivot = [&](const Sampled& s) {
    return Pivot{s.slope, p.y[s.j] - p.y[s.i], p.x[s.j] - p.x[s.i]};
  };
  Pivot lo = pivot(sample[lo_rank]), hi = pivot(sample[hi_rank]);
  // Equal rounded slopes may still be in either exact order.
  if (lo.num * hi.den > hi.num * lo.den) std::swap(lo, hi);
  return {lo, hi};
}

// The slopes of the pairs strictly between the pivots: the pairs whose order just above lo and
// just below hi differ. Just above lo, points tied at lo are in decreasing index order (the later
// point's key falls faster); just below hi, in increasing index order, as at_hi already is.
std::vector<double> slopes_between(const std::vector<double>& x, const std::vector<double>& y,
                                   const PivotOrder& at_lo, const PivotOrder& at_hi) {
  const size_t n = at_lo.order.size();
  std::vector<uint32_t> rank_hi(n);
  for (size_t r = 0; r < n; ++r) rank_hi[at_hi.order[r].point] = static_cast<uint32_t>(r);
  std::vector<Keyed> seq(n);
  for (size_t i = 0, j = 0; i < n; i = j) {
    while (j < n && at_lo.order[j].key == at_lo.order[i].key) ++j;
    for (size_t r = i; r < j; ++r) {
      const uint32_t point = at_lo.order[i + j - 1 - r].point;
      seq[r] = Keyed{rank_hi[point], point};
    }
  }
  std::vector<double> slopes;
  merge_sort(seq, [&](const Keyed& e, const Keyed* first, const Keyed* last) {
    for (const Keyed* o = first; o != last; ++o)
      slopes.push_back(pair_slope(x, y, std::min(e.point, o->point), std::max(e.point, o->point)));
  });
  return slopes;
}

}  // namespace

std::optional<double> median_pairwise_slope_all_pairs(const std::vector<double>& x,
                                                      const std::vector<double>& y) {
  const size_t n = std::min(x.size(), y.size());
  std::vector<double> slopes;
  slopes.reserve(n * (n - 1) / 2);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j)
      if (x[j] > x[i]) slopes.push_back(pair_slope(x, y, i, j));
  if (slopes.empty()) return std::nullopt;
  auto mid = slopes.begin() + static_cast<std::ptrdiff_t>(slopes.size() / 2);
  std::nth_element(slopes.begin(), mid, slopes.end());
  return *mid;
}

std::optional<double> median_pairwise_slope(const std::vector<double>& x,
                                            const std::vector<double>& y) {
  const size_t n = std::min(x.size(), y.size());
  ExactPoints p;
  if (n < kMinPointsForSelection || x.size() != y.size() || !exact_points(x, y, p))
    return median_pairwise_slope_all_pairs(x, y);
  const uint64_t total = n * (n - 1) / 2, k = total / 2;
  const auto [lo, hi] = pivots(x, y, p, k, total);
  const PivotOrder at_lo = order_at(p, lo);
  const uint64_t lt_lo = at_lo.below, le_lo = lt_lo + at_lo.tied;
  if (lt_lo <= k && k < le_lo) return lo.slope;  // often: most sites' median slope is a tied 0
  const PivotOrder at_hi = order_at(p, hi);
  const uint64_t lt_hi = at_hi.below, le_hi = lt_hi + at_hi.tied;
  if (lt_hi <= k && k < le_hi) return hi.slope;
  if (le_lo <= k && k < lt_hi) {
    std::vector<double> between = slopes_between(x, y, at_lo, at_hi);
    auto mid = between.begin() + static_cast<std::ptrdiff_t>(k - le_lo);
    std::nth_element(between.begin(), mid, between.end());
    return *mid;
  }
  return median_pairwise_slope_all_pairs(x, y);
}

TrendFit fit_trend(const std::vector<uint64_t>& x_all, const std::vector<uint64_t>& y_all) {
  TrendFit f;
  const size_t n_all = std::min(x_all.size(), y_all.size());
  const size_t warmup = trend_warmup(n_all);
  if (n_all < warmup + 4) return f;
  // At most 256 evenly spaced points keep the O(n^2) pairwise slopes cheap.
  const size_t n_fit = n_all - warmup;
  const size_t stride = (n_fit + 255) / 256;
  std::vector<double> x, y;
  for (size_t i = warmup; i < n_all; i += stride) {
    x.push_back(static_cast<double>(x_all[i]));
    y.push_back(static_cast<double>(y_all[i]));
  }
  if (x.back() != static_cast<double>(x_all[n_all - 1])) {
    x.push_back(static_cast<double>(x_all[n_all - 1]));
    y.push_back(static_cast<double>(y_all[n_all - 1]));
  }
  const size_t n = x.size();
  const std::optional<double> slope = median_pairwise_slope(x, y);
  if (!slope) return f;
  f.slope = *slope;
  std::vector<double> intercepts(n);
  for (size_t i = 0; i < n; ++i) intercepts[i] = y[i] - f.slope * x[i];
  auto imid = intercepts.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(intercepts.begin(), imid, intercepts.end());
  f.intercept = *imid;
  // A point agrees with the trend when it lies within two steps' growth of the line (spacing of
  // the kept points counted): a steady leak agrees everywhere, a one-off jump or noise does not.
  const double spacing = (x.back() - x.front()) / static_cast<double>(n - 1);
  const double band = std::max(1.0, 2.0 * std::fabs(f.slope) * std::max(1.0, spacing));
  size_t agree = 0;
  for (size_t i = 0; i < n; ++i)
    if (std::fabs(y[i] - (f.intercept + f.slope * x[i])) <= band) ++agree;
  f.confidence = static_cast<double>(agree) / static_cast<double>(n);
  f.points = n_fit;
  f.warmup = warmup;
  f.first_bytes = y_all[warmup];
  f.last_bytes = y_all[n_all - 1];
  return f;
}

}  // namespace gpumemshim::analyzer

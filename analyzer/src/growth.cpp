// Growth: the sampler behind it and the robust trend fit.
#include "gpumemshim/analyzer/growth.h"

#include <algorithm>
#include <cmath>

namespace gpumemshim::analyzer {

namespace {
uint64_t round_up(uint64_t v, uint64_t k) { return (v + k - 1) / k * k; }
}  // namespace

void SiteSampler::boundary(uint64_t index, const std::vector<uint64_t>& live_by_site) {
  if (index <= last_) return;
  last_ = index;
  by_site_start_.clear();  // the index no longer covers the log
  by_site_.clear();
  const uint64_t tag = round_up(index, k_);
  if (!dirty_.empty() && (tags_.empty() || tags_.back() != tag)) tags_.push_back(tag);
  const auto group = static_cast<uint32_t>(tags_.size() - 1);
  for (uint32_t site : dirty_) {
    dirty_flag_[site] = 0;
    if (site >= last_entry_.size()) {
      last_entry_.resize(site + 1, kNoEntry);
      sites_ = last_entry_.size();
    }
    uint32_t& e = last_entry_[site];
    // A value for this tag already: the later one holds.
    if (e != kNoEntry && log_[e].group == group) {
      log_[e].bytes = live_by_site[site];
    } else {
      e = static_cast<uint32_t>(log_.size());
      log_.push_back(Entry{live_by_site[site], site, group});
    }
  }
  dirty_.clear();
  uint64_t k = k_;
  while (last_ / k > max_points_) k *= 2;
  if (k != k_) thin(k);
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

void SiteSampler::finish() {
  by_site_start_.assign(sites_ + 1, 0);
  for (const Entry& e : log_) ++by_site_start_[e.site + 1];
  for (size_t s = 1; s <= sites_; ++s) by_site_start_[s] += by_site_start_[s - 1];
  by_site_.resize(log_.size());
  std::vector<uint32_t> next(by_site_start_.begin(), by_site_start_.end() - 1);
  for (size_t i = 0; i < log_.size(); ++i) by_site_[next[log_[i].site]++] = static_cast<uint32_t>(i);
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
  // The site's entries in tag order: from the index, or (not finished) by a scan of the log.
  std::vector<uint32_t> scanned;
  const uint32_t* v = nullptr;
  size_t n = 0;
  if (!by_site_start_.empty()) {
    v = by_site_.data() + by_site_start_[site];
    n = by_site_start_[site + 1] - by_site_start_[site];
  } else {
    for (size_t i = 0; i < log_.size(); ++i)
      if (log_[i].site == site) scanned.push_back(static_cast<uint32_t>(i));
    v = scanned.data();
    n = scanned.size();
  }
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
  std::vector<double> slopes;
  slopes.reserve(n * (n - 1) / 2);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j)
      if (x[j] > x[i]) slopes.push_back((y[j] - y[i]) / (x[j] - x[i]));
  if (slopes.empty()) return f;
  auto mid = slopes.begin() + static_cast<std::ptrdiff_t>(slopes.size() / 2);
  std::nth_element(slopes.begin(), mid, slopes.end());
  f.slope = *mid;
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

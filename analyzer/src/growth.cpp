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
  const uint64_t tag = round_up(index, k_);
  for (uint32_t site : dirty_) {
    dirty_flag_[site] = 0;
    if (site >= samples_.size()) samples_.resize(site + 1);
    std::vector<Sample>& v = samples_[site];
    if (!v.empty() && v.back().tag == tag) v.back().bytes = live_by_site[site];
    else v.push_back(Sample{tag, live_by_site[site]});
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
  for (std::vector<Sample>& v : samples_) {
    size_t out = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      Sample s{round_up(v[i].tag, k_), v[i].bytes};
      if (out > 0 && v[out - 1].tag == s.tag) v[out - 1] = s;
      else v[out++] = s;
    }
    v.resize(out);
    v.shrink_to_fit();
  }
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
  if (site >= samples_.size()) return y;
  const std::vector<Sample>& v = samples_[site];
  size_t j = 0;
  uint64_t value = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    // The last boundary may not be a kept multiple: values tagged up to the next multiple hold.
    uint64_t upto = (i + 1 == x.size()) ? round_up(x[i], k_) : x[i];
    while (j < v.size() && v[j].tag <= upto) value = v[j++].bytes;
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

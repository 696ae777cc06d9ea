// The step/time sampler behind growth: after any number of thinnings (the stride doubling to keep
// at most max_points boundaries), a site's series holds, at each kept point, its live bytes at the
// last boundary that the point covers, exactly as sampling every site at every boundary would.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "gpumemshim/analyzer/growth.h"

namespace an = gpumemshim::analyzer;

namespace {

uint64_t round_up(uint64_t v, uint64_t k) { return (v + k - 1) / k * k; }

// What the series must be: every site's bytes at every boundary, kept in full.
std::vector<uint64_t> expected_series(const std::vector<std::pair<uint64_t, std::vector<uint64_t>>>& all,
                                      const std::vector<uint64_t>& points, uint64_t stride, uint32_t site) {
  std::vector<uint64_t> y;
  for (size_t i = 0; i < points.size(); ++i) {
    const uint64_t upto = i + 1 == points.size() ? round_up(points[i], stride) : points[i];
    uint64_t value = 0;
    for (const auto& [b, live] : all)
      if (round_up(b, stride) <= upto && site < live.size()) value = live[site];
    y.push_back(value);
  }
  return y;
}

}  // namespace

TEST(SiteSampler, SeriesMatchSamplingEverySiteAtEveryBoundary) {
  for (uint64_t seed : {1, 2, 3}) {
    std::mt19937_64 rng(seed);
    an::SiteSampler sampler(32);
    std::vector<uint64_t> live;
    std::vector<std::pair<uint64_t, std::vector<uint64_t>>> all;  // boundary -> bytes then
    uint64_t index = 0;
    for (int round = 0; round < 1500; ++round) {
      // A few sites change (new sites appear over time), some rounds none.
      const int changes = static_cast<int>(rng() % 4);
      for (int c = 0; c < changes; ++c) {
        const auto site = static_cast<uint32_t>(rng() % (5 + round / 100));
        if (site >= live.size()) live.resize(site + 1, 0);
        live[site] = rng() % 3 == 0 ? 0 : rng() % 1000;
        sampler.touch(site);
      }
      index += 1 + (rng() % 5 == 0 ? rng() % 3 : 0);  // boundaries may skip numbers (time buckets)
      sampler.boundary(index, live);
      all.emplace_back(index, live);
    }
    ASSERT_GT(sampler.stride(), 16u) << "the test must thin several times";
    const std::vector<uint64_t> points = sampler.points();
    ASSERT_LE(points.size(), 33u);
    for (uint32_t site = 0; site < live.size() + 2; ++site)
      ASSERT_EQ(sampler.series(site), expected_series(all, points, sampler.stride(), site))
          << "seed " << seed << " site " << site;
    EXPECT_EQ(sampler.sites(), live.size());
    // for_each_value, in point order, with each value holding from its point on: the same series.
    ASSERT_EQ(sampler.point_count(), points.size());
    std::vector<std::vector<uint64_t>> rebuilt(sampler.sites(),
                                               std::vector<uint64_t>(points.size()));
    size_t previous_point = 0;
    sampler.for_each_value([&](uint32_t site, size_t point, uint64_t bytes) {
      ASSERT_GE(point, previous_point);
      ASSERT_LT(point, points.size());
      previous_point = point;
      std::fill(rebuilt[site].begin() + static_cast<std::ptrdiff_t>(point), rebuilt[site].end(),
                bytes);
    });
    for (uint32_t site = 0; site < sampler.sites(); ++site)
      ASSERT_EQ(rebuilt[site], sampler.series(site)) << "seed " << seed << " site " << site;
  }
}

// A boundary after the series was read extends it again.
TEST(SiteSampler, BoundaryAfterReadingIsSeen) {
  an::SiteSampler sampler(512);
  std::vector<uint64_t> live{7};
  sampler.touch(0);
  sampler.boundary(1, live);
  EXPECT_EQ(sampler.series(0), (std::vector<uint64_t>{7}));
  live[0] = 9;
  sampler.touch(0);
  sampler.boundary(2, live);
  EXPECT_EQ(sampler.series(0), (std::vector<uint64_t>{7, 9}));
}

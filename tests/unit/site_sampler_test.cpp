// The step sampler behind growth: after any number of thinnings (the stride doubling to keep
// at most max_points boundaries), a site's series holds, at each kept point, its live bytes at the
// last boundary that the point covers, exactly as sampling every site at every boundary would.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "findings/growth.h"

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

// The caller's side, as the replay does it: it touches a changed site only while the sampler
// wants touches, and tells each boundary how many changes it made so far. counted == false: no
// counts (the sampler then always asks for touches).
static void sample_randomly(uint64_t seed, bool counted) {
  std::mt19937_64 rng(seed);
  an::SiteSampler sampler(32);
  std::vector<uint64_t> live;
  std::vector<std::pair<uint64_t, std::vector<uint64_t>>> all;  // boundary -> bytes then
  uint64_t index = 0, changes_so_far = 0;
  size_t touching = 0, comparing = 0;  // boundaries reached in either way
  for (int round = 0; round < 1500; ++round) {
    (sampler.wants_touches() ? touching : comparing) += 1;
    // A few sites change (new sites appear over time), some rounds none; stretches of rounds
    // where many changes come (a site may change and change back: touched, same bytes).
    const bool busy = (round / 100) % 2 == 1;
    const int changes = static_cast<int>(rng() % (busy ? 40 : 4));
    for (int c = 0; c < changes; ++c) {
      const auto site = static_cast<uint32_t>(rng() % (5 + round / 100));
      if (site >= live.size()) live.resize(site + 1, 0);
      live[site] = rng() % 3 == 0 ? 0 : rng() % 1000;
      if (sampler.wants_touches()) sampler.touch(site);
      ++changes_so_far;
    }
    index += 1 + (rng() % 5 == 0 ? rng() % 3 : 0);  // boundaries may skip numbers
    sampler.boundary(index, live, counted ? changes_so_far : 0);
    all.emplace_back(index, live);
  }
  if (counted) {
    EXPECT_GT(touching, 100u) << "quiet rounds must ask for touches";
    EXPECT_GT(comparing, 100u) << "busy rounds must compare instead";
  } else {
    EXPECT_EQ(comparing, 0u);
  }
  {
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

TEST(SiteSampler, SeriesMatchSamplingEverySiteAtEveryBoundary) {
  for (uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE(seed);
    sample_randomly(seed, false);
  }
}

// Touching or comparing, switched back and forth by how many changes come between boundaries:
// the same series.
TEST(SiteSampler, SeriesAlikeWhetherTouchedOrCompared) {
  for (uint64_t seed : {4, 5, 6}) {
    SCOPED_TRACE(seed);
    sample_randomly(seed, true);
  }
}

// Many changes per boundary: no touches needed, and a site that changed and came back writes
// nothing new; few again: touches again.
TEST(SiteSampler, StopsAskingForTouchesWhileChangesOutnumberSites) {
  an::SiteSampler sampler(512);
  std::vector<uint64_t> live{5, 0, 0, 0};
  sampler.touch(0);
  sampler.boundary(1, live, 8);  // 8 changes, 1 site touched: 1 <= 2 * 8
  EXPECT_FALSE(sampler.wants_touches());
  live = {5, 3, 0, 9};  // untouched: compared
  sampler.boundary(2, live, 16);
  EXPECT_EQ(sampler.series(1), (std::vector<uint64_t>{0, 3}));
  EXPECT_EQ(sampler.series(3), (std::vector<uint64_t>{0, 9}));
  EXPECT_EQ(sampler.sites(), 4u);
  EXPECT_FALSE(sampler.wants_touches());
  sampler.boundary(3, live, 17);  // 1 change for 4 sites: touches again
  EXPECT_TRUE(sampler.wants_touches());
  live[2] = 4;
  sampler.touch(2);
  sampler.boundary(4, live, 18);
  EXPECT_EQ(sampler.series(2), (std::vector<uint64_t>{0, 0, 0, 4}));
  EXPECT_EQ(sampler.series(0), (std::vector<uint64_t>{5, 5, 5, 5}));
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

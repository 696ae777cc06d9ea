// Theil–Sen's median slope by exact selection (median_pairwise_slope) against listing every pair
// and taking the middle one with std::nth_element: the same double, bit for bit, on points with
// ties, steps, steady growth, noise, equal or falling x and values too large for the exact path.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "findings/growth.h"

namespace an = gpumemshim::analyzer;

namespace {

struct Points {
  std::vector<double> x, y;
};

// Strictly increasing x (as the sampler's boundaries are), y of the given shape.
Points make_points(std::mt19937_64& rng, size_t n, int shape) {
  Points p;
  uint64_t x = rng() % 5;
  uint64_t level = rng() % 1000000;
  const uint64_t rate = rng() % 5000;
  for (size_t i = 0; i < n; ++i) {
    x += 1 + (shape == 5 ? rng() % 1000 : rng() % 3 == 0);
    uint64_t y = 0;
    // 0 noise with many ties, 1 an exact line (every slope tied), 2 a noisy line, 3 steps, 4 two
    // levels, 5 large values and wide x, 6 near the exact limit (2^53), 7 beyond it (listing all
    // pairs), 8 a saw tooth.
    if (shape == 0) y = rng() % 100;
    if (shape == 1) y = level + rate * x;
    if (shape == 2) y = level + rate * x + rng() % 64;
    if (shape == 3) y = level += rng() % 20 == 0 ? rng() % 4096 : 0;
    if (shape == 4) y = (rng() % 2) * 1000;
    if (shape == 5) y = rng() % (uint64_t{1} << 40);
    if (shape == 6) y = (uint64_t{1} << 53) - 1 - rng() % 1000;
    if (shape == 7) y = (uint64_t{1} << 60) + rng();
    if (shape == 8) y = level + (i % 7) * rate;
    p.x.push_back(static_cast<double>(x));
    p.y.push_back(static_cast<double>(y));
  }
  return p;
}

void expect_same(const Points& p) {
  const std::optional<double> fast = an::median_pairwise_slope(p.x, p.y);
  const std::optional<double> all = an::median_pairwise_slope_all_pairs(p.x, p.y);
  ASSERT_EQ(fast.has_value(), all.has_value());
  if (fast) {
    EXPECT_EQ(std::bit_cast<uint64_t>(*fast), std::bit_cast<uint64_t>(*all))
        << *fast << " vs " << *all;
  }
}

}  // namespace

TEST(TheilSen, SelectionPicksTheSameSlopeAsListingEveryPair) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 3000; ++round) {
    const size_t n = 2 + rng() % 300;
    SCOPED_TRACE(testing::Message() << "round " << round << " n " << n);
    expect_same(make_points(rng, n, static_cast<int>(round % 9)));
  }
}

TEST(TheilSen, EqualOrFallingXAndFewPoints) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 500; ++round) {
    Points p = make_points(rng, 1 + rng() % 120, static_cast<int>(round % 9));
    // Some x repeated or out of order: those pairs are skipped, as before.
    for (size_t i = 1; i < p.x.size(); ++i)
      if (rng() % 5 == 0) p.x[i] = p.x[i - 1 - rng() % i];
    expect_same(p);
  }
  expect_same(Points{{1, 1, 1, 1}, {1, 2, 3, 4}});  // no pair with rising x
  expect_same(Points{{}, {}});
}

TEST(TheilSen, FitOfASteadyLeak) {
  std::vector<uint64_t> x, y;
  for (uint64_t i = 1; i <= 500; ++i) {
    x.push_back(i);
    y.push_back(1000 + 4096 * i + (i % 3));
  }
  const an::TrendFit f = an::fit_trend(x, y);
  EXPECT_EQ(f.points, 450u);
  EXPECT_EQ(f.warmup, 50u);
  EXPECT_NEAR(f.slope, 4096, 1);
  EXPECT_EQ(f.confidence, 1.0);
}

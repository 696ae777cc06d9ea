// The one-pass timeline sampler: after any number of bucket widenings, each bucket holds exactly
// what sampling at the final width would have kept (its first lowest and first highest point), and
// the sites' bytes captured at those points are the ones of that moment.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "findings/timeline_samples.h"

namespace an = gpumemshim::analyzer;

namespace {

struct Point {
  uint64_t time, live, allocated;
  std::map<uint32_t, uint64_t> sites;
};

bool lower(const Point& a, const Point& b) {
  return std::pair{a.live, a.allocated} < std::pair{b.live, b.allocated};
}

std::map<uint32_t, uint64_t> as_map(const an::SampledPoint& p) {
  std::map<uint32_t, uint64_t> m;
  uint32_t last = 0;
  p.for_each_site([&](uint32_t site, uint64_t bytes) {
    EXPECT_TRUE(m.empty() || site > last) << "by increasing site";
    EXPECT_NE(bytes, 0u);
    m[last = site] = bytes;
  });
  return m;
}

}  // namespace

TEST(TimelineSampler, WideningKeepsEveryBucketsExactLowAndHigh) {
  std::mt19937_64 rng(5);
  an::TimelineSampler sampler;
  std::vector<Point> points;
  std::map<uint32_t, uint64_t> sites;  // raw site -> bytes now
  uint64_t time = 0;
  sampler.sites(20);
  for (int i = 0; i < 200000; ++i) {
    time += rng() % 5000;  // sometimes several events at one time
    if (i == 100000) sampler.sites(40);  // new sites appear in the middle of a bucket
    uint32_t site = static_cast<uint32_t>(rng() % (i < 100000 ? 20 : 40));
    // Often back to a value seen before (ties); most sites hold bytes, but in the last quarter
    // most do not (points keep their sites in either form).
    uint64_t bytes = (rng() % 8) * 512;
    if (i >= 150000 && rng() % 4 != 0) bytes = 0;
    sites[site] = bytes;
    sampler.site_changed(site, bytes);
    uint64_t live = 0;
    for (auto& [s, b] : sites) live += b;
    uint64_t allocated = rng() % 3;
    std::map<uint32_t, uint64_t> nonzero;
    for (auto& [s, b] : sites)
      if (b) nonzero[s] = b;
    points.push_back(Point{time, live, allocated, nonzero});
    sampler.point(time, live, 7, allocated);
  }
  sampler.finish();
  const uint64_t width = sampler.width_ns();
  EXPECT_GT(width, an::TimelineSampler::kFirstWidthNs);  // it did widen
  const auto& buckets = sampler.buckets();
  ASSERT_LE(buckets.size(), an::TimelineSampler::kMaxBuckets);

  // What sampling at the final width gives, computed directly.
  std::map<uint64_t, std::pair<size_t, size_t>> expected;  // bucket -> (low, high) point index
  for (size_t i = 0; i < points.size(); ++i) {
    auto [it, inserted] = expected.try_emplace(points[i].time / width, i, i);
    if (inserted) continue;
    if (lower(points[i], points[it->second.first])) it->second.first = i;
    if (lower(points[it->second.second], points[i])) it->second.second = i;
  }
  ASSERT_EQ(buckets.size(), expected.size());
  size_t dense = 0, sparse = 0;
  for (const an::SampledBucket& b : buckets)
    for (const an::SampledPoint* p : {&b.low, &b.high}) {
      dense += !p->dense.empty();
      sparse += !p->sites.empty();
    }
  EXPECT_GT(dense, 10u);
  EXPECT_GT(sparse, 10u);
  size_t k = 0;
  for (const auto& [index, lh] : expected) {
    const an::SampledBucket& b = buckets[k++];
    ASSERT_EQ(b.index, index);
    const Point& low = points[lh.first];
    const Point& high = points[lh.second];
    EXPECT_EQ(b.low.time_ns, low.time);
    EXPECT_EQ(b.low.live_bytes, low.live);
    EXPECT_EQ(b.low.seq, lh.first);
    EXPECT_EQ(b.low.reserved_bytes, 7u);
    EXPECT_EQ(as_map(b.low), low.sites);
    EXPECT_EQ(b.high.seq, lh.second);
    EXPECT_EQ(b.high.live_bytes, high.live);
    EXPECT_EQ(as_map(b.high), high.sites);
    EXPECT_EQ(b.same(), lh.first == lh.second);
  }
}

TEST(TimelineSampler, NothingSampledNoBuckets) {
  an::TimelineSampler sampler;
  sampler.finish();
  EXPECT_FALSE(sampler.any());
  EXPECT_TRUE(sampler.buckets().empty());
}

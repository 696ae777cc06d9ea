// PeakSiteTracker must give every site's live bytes at the last peak exactly as a full copy taken
// at each new peak would, whether its change log is still open at the end, was settled long ago,
// or was settled and then reopened by a later peak; sites first seen after the peak held nothing.
#include "findings/peak_sites.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace ga = gpumemshim::analyzer;

namespace {

struct Outcome {
  std::vector<uint64_t> tracked, copied;  // at_peak() and the copy at the last peak
  bool has_peak = false;
};

// `changes` random changes to up to `sites` sites (new ones appear over time); a new peak
// whenever the total exceeds the highest so far, or, with `peak_until`, only before that change.
Outcome simulate(uint64_t seed, size_t changes, size_t sites, size_t peak_until) {
  std::mt19937_64 rng(seed);
  ga::PeakSiteTracker tracker;
  std::vector<uint64_t> live;
  std::vector<uint64_t> copy;
  uint64_t total = 0, highest = 0;
  for (size_t i = 0; i < changes; ++i) {
    const size_t known = std::min(sites, 1 + i / 8);
    if (live.size() < known) live.resize(known, 0);
    const auto site = static_cast<uint32_t>(rng() % known);
    tracker.before_change(site, live);
    const bool grow = live[site] == 0 || rng() % 2 == 0;
    const uint64_t by = grow ? 1 + rng() % 1000 : 1 + rng() % live[site];
    live[site] = grow ? live[site] + by : live[site] - by;
    total = grow ? total + by : total - by;
    if (total > highest && i < peak_until) {
      highest = total;
      tracker.new_peak();
      copy = live;
    }
  }
  Outcome r;
  r.has_peak = tracker.has_peak();
  r.tracked = tracker.at_peak(live);
  r.copied = copy;
  r.copied.resize(live.size(), 0);
  if (!r.has_peak) r.copied.assign(live.size(), 0);
  return r;
}

}  // namespace

TEST(PeakSites, EqualsACopyAtEachPeak) {
  // Peaks to the end: the log is open (and settled whenever a peak is long ago).
  for (uint64_t seed : {1, 2, 3}) {
    Outcome r = simulate(seed, 200'000, 500, SIZE_MAX);
    ASSERT_TRUE(r.has_peak);
    EXPECT_EQ(r.tracked, r.copied) << seed;
  }
}

TEST(PeakSites, SettledLogAndSitesNewAfterThePeak) {
  // The last peak early on: the log settles, and sites that first appear later held nothing.
  Outcome early = simulate(4, 100'000, 3000, 2000);
  ASSERT_TRUE(early.has_peak);
  EXPECT_EQ(early.tracked, early.copied);
  // Just under and over one log's worth of changes after the last peak.
  for (size_t after : {ga::PeakSiteTracker::kMaxLog - 1, ga::PeakSiteTracker::kMaxLog,
                       ga::PeakSiteTracker::kMaxLog + 1}) {
    Outcome r = simulate(5, 30'000 + after, 300, 30'000);
    EXPECT_EQ(r.tracked, r.copied) << after;
  }
}

TEST(PeakSites, NoPeakMeansNothing) {
  ga::PeakSiteTracker tracker;
  std::vector<uint64_t> live = {5, 7};
  tracker.before_change(0, live);
  EXPECT_FALSE(tracker.has_peak());
  EXPECT_EQ(tracker.at_peak(live), (std::vector<uint64_t>{0, 0}));
}

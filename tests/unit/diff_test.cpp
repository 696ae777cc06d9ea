// diff_reports on typed reports: sites matched by id, percentages, new leaks, the regression rule.
#include <gtest/gtest.h>

#include <optional>

#include "gpumemshim/analyzer/render.h"

namespace an = gpumemshim::analyzer;

namespace {

std::vector<an::Frame> stack(uint32_t line) { return {an::Frame{"f", "/src/a.py", line, "", 0, 0, false, false}}; }

an::SiteGroup leak(const std::string& id, const std::string& kind, uint64_t bytes, uint32_t line,
                   bool suppressed = false) {
  an::SiteGroup g;
  g.id = id;
  g.kind = kind;
  g.bytes = bytes;
  g.stack = stack(line);
  g.suppressed = suppressed;
  return g;
}

struct PeakSiteBytes {
  std::string id;
  uint64_t bytes;
  uint32_t line;
};

// One process; with peak sites, a timeline that holds them.
an::Report report(uint64_t peak, uint64_t leaked, std::vector<an::SiteGroup> leaks,
                  std::optional<std::vector<PeakSiteBytes>> peak_sites) {
  an::Report r;
  r.summary.peak_bytes = peak;
  r.summary.leaked_bytes = leaked;
  an::ProcessReport& p = r.processes.emplace_back();
  p.trace = "t";
  p.leaks = std::move(leaks);
  if (peak_sites) {
    an::Timeline& tl = p.timeline.emplace();
    for (const PeakSiteBytes& s : *peak_sites) {
      tl.at_peak.push_back(an::PeakSite{tl.all_sites.size(), s.bytes});
      tl.all_sites.push_back(an::TimelineSite{s.id, "", stack(s.line), s.bytes});
    }
  }
  return r;
}

}  // namespace

TEST(Diff, SitesMatchedByIdWorseAndBetter) {
  an::Report base = report(1000, 100, {leak("a", "leak", 100, 1), leak("c", "cached", 500, 3)},
                           std::vector<PeakSiteBytes>{{"p", 900, 9}});
  an::Report next = report(1050, 160,
                           {leak("a", "leak", 60, 1), leak("b", "leak", 100, 2), leak("s", "leak", 7, 4, true)},
                           std::vector<PeakSiteBytes>{{"p", 950, 9}});
  an::ReportDiff d = an::diff_reports(base, next);
  ASSERT_EQ(d.worse.size(), 2u);
  EXPECT_EQ(d.worse[0].id, "b");  // +100 before +50
  EXPECT_EQ(d.worse[0].label, "/src/a.py:2");
  EXPECT_EQ(d.worse[1].what, "peak");
  ASSERT_EQ(d.better.size(), 1u);
  EXPECT_EQ(d.better[0].id, "a");
  EXPECT_EQ(d.better[0].delta(), -40);
  EXPECT_EQ(d.new_leak_sites, 1u);  // cached and suppressed sites are not leaks
  EXPECT_TRUE(d.peak_sites_known);
  EXPECT_DOUBLE_EQ(*an::change_pct(1000, 1050), 5.0);
  EXPECT_TRUE(an::is_regression(d, 1000));  // a new leak site regresses at any percentage
}

TEST(Diff, PercentRuleWithoutNewLeaks) {
  std::vector<an::SiteGroup> leaks{leak("a", "leak", 100, 1)};
  an::ReportDiff d = an::diff_reports(report(1000, 100, leaks, std::nullopt), report(1100, 100, leaks, std::nullopt));
  EXPECT_FALSE(d.peak_sites_known);
  EXPECT_TRUE(an::is_regression(d, 9.9));
  EXPECT_FALSE(an::is_regression(d, 10));
  EXPECT_FALSE(an::change_pct(0, 1).has_value());  // from nothing: infinitely worse
  EXPECT_DOUBLE_EQ(*an::change_pct(0, 0), 0.0);
  an::ReportDiff from_zero = an::diff_reports(report(0, 0, {}, std::nullopt), report(10, 0, {}, std::nullopt));
  EXPECT_TRUE(an::is_regression(from_zero, 1e9));
  nlohmann::json j = an::diff_json(d, 10.0);
  EXPECT_EQ(j["regression"], false);
  EXPECT_EQ(j["schema"], "gpumemshim-diff/1");
}

// diff_reports on report JSON: sites matched by id, percentages, new leaks, the regression rule.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "render/diff.h"

namespace an = gpumemshim::analyzer;
using nlohmann::json;

namespace {

json stack(int line) {
  return json::array({{{"function", "f"}, {"file", "/src/a.py"}, {"line", line}, {"module", ""}}});
}

json report(uint64_t peak, uint64_t leaked, json leaks, json peak_sites) {
  json process = {{"trace", "t"}};
  if (!peak_sites.is_null()) process["timeline"] = {{"peak", {{"sites", peak_sites}}}};
  return {{"summary", {{"peak_bytes", peak}, {"leaked_bytes", leaked}}},
          {"leaks", leaks},
          {"processes", json::array({process})}};
}

}  // namespace

TEST(Diff, SitesMatchedByIdWorseAndBetter) {
  json base = report(1000, 100,
                     json::array({{{"id", "a"}, {"kind", "leak"}, {"bytes", 100}, {"stack", stack(1)}},
                                  {{"id", "c"}, {"kind", "cached"}, {"bytes", 500}, {"stack", stack(3)}}}),
                     json::array({{{"id", "p"}, {"bytes", 900}, {"stack", stack(9)}}}));
  json next = report(1050, 160,
                     json::array({{{"id", "a"}, {"kind", "leak"}, {"bytes", 60}, {"stack", stack(1)}},
                                  {{"id", "b"}, {"kind", "leak"}, {"bytes", 100}, {"stack", stack(2)}},
                                  {{"id", "s"}, {"kind", "leak"}, {"bytes", 7}, {"suppressed", true}}}),
                     json::array({{{"id", "p"}, {"bytes", 950}, {"stack", stack(9)}}}));
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
  json leaks = json::array({{{"id", "a"}, {"kind", "leak"}, {"bytes", 100}}});
  an::ReportDiff d = an::diff_reports(report(1000, 100, leaks, nullptr), report(1100, 100, leaks, nullptr));
  EXPECT_FALSE(d.peak_sites_known);
  EXPECT_TRUE(an::is_regression(d, 9.9));
  EXPECT_FALSE(an::is_regression(d, 10));
  EXPECT_FALSE(an::change_pct(0, 1).has_value());  // from nothing: infinitely worse
  EXPECT_DOUBLE_EQ(*an::change_pct(0, 0), 0.0);
  an::ReportDiff from_zero = an::diff_reports(report(0, 0, json::array(), nullptr), report(10, 0, json::array(), nullptr));
  EXPECT_TRUE(an::is_regression(from_zero, 1e9));
  json j = an::diff_json(d, 10.0);
  EXPECT_EQ(j["regression"], false);
  EXPECT_EQ(j["schema"], "gpumemshim-diff/1");
}

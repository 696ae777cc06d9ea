// JUnit and SARIF writers on report JSON with every documented finding kind (docs/report-json.md),
// including the ones no fake-CUDA scenario produces yet.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "render/ci_findings.h"
#include "render/report_junit.h"
#include "render/report_sarif.h"

namespace an = gpumemshim::analyzer;
using nlohmann::json;

namespace {

json frame(const std::string& fn, const std::string& file, int line) {
  return {{"function", fn}, {"file", file}, {"line", line}, {"module", "/bin/app"},
          {"python", false}, {"inlined", false}, {"pc", "0x10"}};
}

json report() {
  json no_file = {{"function", "cudaMalloc"}, {"file", ""}, {"line", 0}, {"module", "libcudart.so"},
                  {"python", false}, {"inlined", false}, {"pc", "0x99"}};
  return {
      {"schema", "gpumemshim-report/1"},
      {"summary", {{"leaked_bytes", 4096}, {"peak_bytes", 1 << 20}}},
      {"processes", json::array({{{"pid", 7}, {"trace", "/t/a b.trace"}, {"duration_s", 1.5}, {"host", "h"}}})},
      {"leaks", json::array({
           {{"id", "aaa"}, {"kind", "leak"}, {"reason", "alive at exit in a trace without step markers"},
            {"bytes", 4096}, {"count", 2}, {"api", "cudaMalloc"},
            {"stack", json::array({no_file, frame("make", "/src/app.cpp", 12), frame("main", "/src/app.cpp", 30)})}},
           {{"id", "bbb"}, {"kind", "cached"}, {"bytes", 8192}, {"count", 1}, {"api", "cudaMalloc"},
            {"stack", json::array({frame("seg", "/src/alloc.cpp", 5)})}},
           {{"id", "ccc"}, {"kind", "leak"}, {"bytes", 10}, {"count", 1}, {"suppressed", true},
            {"suppressed_by", "leak:quiet"}, {"stack", json::array({frame("quiet", "/src/q.cpp", 1)})}}})},
      {"growth", json::array({{{"id", "ggg"}, {"bytes_per_step", 1048576.0}, {"steps", 20},
                               {"first_live_bytes", 0}, {"last_live_bytes", 20 << 20}, {"confidence", 0.97},
                               {"projected_oom_step", 1200},
                               {"stack", json::array({frame("step", "/src/train.py", 44)})}}})},
      {"fragmentation",
       {{"per_device", json::array({{{"pid", 7}, {"device", 0},
                                     {"ooms", json::array({{{"time_s", 2.0}, {"requested_bytes", 512},
                                                            {"device_free_bytes", 4096},
                                                            {"largest_free_block_bytes", 256},
                                                            {"enough_total_free", true}},
                                                           {{"requested_bytes", 9999}, {"enough_total_free", false}}})}}})}}},
      {"recommendations", json::array({{{"id", "expandable-segments"}, {"title", "Use expandable segments"},
                                        {"action", "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."},
                                        {"finding", "fragmentation:7:0"}, {"evidence", {{"free", 4096}}}},
                                       {{"id", "item-or-detach"}, {"title", "Detach"}, {"action", "Call .item()."},
                                        {"finding", "growth:ggg"}, {"evidence", "1 MiB per step"}}})},
      {"failures", json::array()},
      {"address_space", json::array()}};
}

const json* result_of(const json& sarif, const std::string& rule) {
  for (const json& r : sarif["runs"][0]["results"])
    if (r["ruleId"] == rule) return &r;
  return nullptr;
}

}  // namespace

TEST(CiFindings, EveryKindOnceWithItsAdviceAndFailState) {
  auto findings = an::ci_findings(report(), an::FailPolicy{true, 1000.0});
  ASSERT_EQ(findings.size(), 5u);  // 3 leaks, 1 growth, 1 fragmentation OOM (the other had no free)
  EXPECT_EQ(findings[0].rule, "leak");
  EXPECT_TRUE(findings[0].fails);
  EXPECT_NE(findings[0].message.find("/src/app.cpp:12"), std::string::npos) << findings[0].message;
  EXPECT_NE(findings[0].message.find("Alive at exit in a trace without step markers."), std::string::npos);
  EXPECT_FALSE(findings[1].fails);  // cached
  EXPECT_FALSE(findings[2].fails);  // suppressed
  EXPECT_EQ(findings[3].rule, "growth");
  EXPECT_TRUE(findings[3].fails);   // 1 MiB/step over 1000
  ASSERT_EQ(findings[3].advice.size(), 1u);
  EXPECT_NE(findings[3].message.find("step 1200"), std::string::npos);
  EXPECT_EQ(findings[4].rule, "fragmentation");
  ASSERT_EQ(findings[4].advice.size(), 1u);
  EXPECT_NE(findings[4].advice[0].find("expandable_segments"), std::string::npos);
  // Without a growth limit growth never fails; without leaks over the limit no leak fails.
  auto relaxed = an::ci_findings(report(), an::FailPolicy{false, std::nullopt});
  for (const auto& f : relaxed) EXPECT_FALSE(f.fails) << f.title;
}

TEST(Sarif, ResultsPerKindLocatedAtTheUserFrame) {
  json sarif = an::report_sarif(report(), an::FailPolicy{true, std::nullopt});
  EXPECT_EQ(sarif["version"], "2.1.0");
  EXPECT_EQ(sarif["runs"][0]["tool"]["driver"]["name"], "gpumemshim");
  EXPECT_EQ(sarif["runs"][0]["results"].size(), 5u);
  const json* leak = result_of(sarif, "gpumemshim/leak");
  ASSERT_TRUE(leak);
  EXPECT_EQ((*leak)["level"], "error");
  // locations[0] skips the frame without a file: the innermost user frame.
  const json& loc = (*leak)["locations"][0]["physicalLocation"];
  EXPECT_EQ(loc["artifactLocation"]["uri"], "file:///src/app.cpp");
  EXPECT_EQ(loc["region"]["startLine"], 12);
  EXPECT_EQ((*leak)["codeFlows"][0]["threadFlows"][0]["locations"].size(), 3u);
  const json* growth = result_of(sarif, "gpumemshim/growth");
  ASSERT_TRUE(growth);
  EXPECT_EQ((*growth)["level"], "warning");
  EXPECT_NE((*growth)["message"]["text"].get<std::string>().find("1048576 bytes"), std::string::npos);
  EXPECT_NE((*growth)["message"]["text"].get<std::string>().find("Call .item()."), std::string::npos);
  const json* frag = result_of(sarif, "gpumemshim/fragmentation");
  ASSERT_TRUE(frag);
  EXPECT_EQ((*frag)["locations"].size(), 0u);  // no stack for a device-level finding
  EXPECT_TRUE(result_of(sarif, "gpumemshim/cached"));
  // Each result's ruleIndex names its rule.
  const json& rules = sarif["runs"][0]["tool"]["driver"]["rules"];
  for (const json& r : sarif["runs"][0]["results"]) EXPECT_EQ(rules[r["ruleIndex"].get<size_t>()]["id"], r["ruleId"]);
}

TEST(Junit, CountsMatchTestcasesAndFailures) {
  std::string xml = an::report_junit(report(), an::FailPolicy{true, 1.0});
  EXPECT_NE(xml.find("<testsuite name=\"gpumemshim.check\" tests=\"5\" failures=\"2\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("classname=\"gpumemshim.growth\""), std::string::npos);
  std::string clean = an::report_junit(json{{"leaks", json::array()}}, an::FailPolicy{});
  EXPECT_NE(clean.find("tests=\"1\" failures=\"0\""), std::string::npos) << clean;
}

TEST(Junit, EscapesMarkupAndControlCharacters) {
  EXPECT_EQ(an::xml_escape("a<b>&\"'\x01\n"), "a&lt;b&gt;&amp;&quot;&apos;?&#10;");
  EXPECT_EQ(an::xml_escape("x\ny", false), "x\ny");
}

TEST(Sarif, FileUrisArePercentEncoded) {
  EXPECT_EQ(an::file_uri("/a b/c#d.py"), "file:///a%20b/c%23d.py");
  EXPECT_EQ(an::file_uri("rel/x.cpp"), "rel/x.cpp");
}

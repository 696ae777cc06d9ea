// JUnit and SARIF writers on a typed report with every finding kind, including the ones no
// fake-CUDA scenario produces yet.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpumemshim/analyzer/render.h"
#include "render/ci_findings.h"
#include "render/escape.h"
#include "report/integrity.h"

namespace an = gpumemshim::analyzer;
using nlohmann::json;

namespace {

an::Frame frame(const std::string& fn, const std::string& file, uint32_t line) {
  return an::Frame{fn, file, line, "/bin/app", 0x10, 0, false, false};
}

an::SiteGroup group(const std::string& id, const std::string& kind, uint64_t bytes, uint64_t count,
                    std::vector<an::Frame> stack) {
  an::SiteGroup g;
  g.id = id;
  g.kind = kind;
  g.bytes = bytes;
  g.count = count;
  g.api = an::Api::kCudaMalloc;
  g.pid = 7;
  g.stack = std::move(stack);
  return g;
}

an::Report report() {
  an::Report r;
  r.summary.leaked_bytes = 4096;
  r.summary.peak_bytes = 1 << 20;
  an::ProcessReport& p = r.processes.emplace_back();
  p.info.pid = 7;
  p.info.host = "h";
  p.trace = "/t/a b.trace";
  p.duration_s = 1.5;
  an::Frame no_file{"cudaMalloc", "", 0, "libcudart.so", 0x99, 0, false, false};
  // Leaks are listed bytes descending, as the report lists them.
  p.leaks.push_back(group("aaa", "leak", 4096, 2,
                          {no_file, frame("make", "/src/app.cpp", 12), frame("main", "/src/app.cpp", 30)}));
  p.leaks.back().reason = "alive at exit in a trace without step markers";
  p.leaks.push_back(group("bbb", "cached", 2048, 1, {frame("seg", "/src/alloc.cpp", 5)}));
  p.leaks.push_back(group("ccc", "leak", 10, 1, {frame("quiet", "/src/q.cpp", 1)}));
  p.leaks.back().suppressed = true;
  p.leaks.back().suppressed_by = "leak:quiet";
  p.leaks.push_back(group("lib", "library", 8, 1,
                          {frame("cublasCreate_v2", "", 0), frame("main", "/src/app.cpp", 3)}));
  p.leaks.back().owner = "cublas";
  an::Growth& g = p.growth.emplace_back();
  g.id = "ggg";
  g.basis = "steps";
  g.bytes_per_step = 1048576.0;
  g.steps = 20;
  g.last_live_bytes = 20 << 20;
  g.confidence = 0.97;
  g.has_projection = true;
  g.projected_oom_step = 1200;
  g.stack = {frame("step", "/src/train.py", 44)};
  an::DeviceFragmentation& d = p.fragmentation.emplace_back();
  d.pid = 7;
  an::OomFinding enough, short_of_it;
  enough.time_ns = 2'000'000'000;
  enough.requested = 512;
  enough.largest_free_block = 256;
  enough.has_device_free = true;
  enough.device_free = 4096;
  enough.enough_total_free = true;
  enough.cause = "fragmentation";
  short_of_it.requested = 9999;
  short_of_it.cause = "device_full";
  d.ooms = {enough, short_of_it};
  p.advice.push_back({"expandable-segments", "Use expandable segments",
                      "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.", "fragmentation:7:0", "free 4096"});
  p.advice.push_back({"item-or-detach", "Detach", "Call .item().", "growth:ggg", "1 MiB per step"});
  return r;
}

const json* result_of(const json& sarif, const std::string& rule) {
  for (const json& r : sarif["runs"][0]["results"])
    if (r["ruleId"] == rule) return &r;
  return nullptr;
}

}  // namespace

TEST(CiFindings, EveryKindOnceWithItsAdviceAndFailState) {
  auto findings = an::ci_findings(report(), an::FailPolicy{true, 1000.0});
  // 4 leak entries, 1 growth, 1 fragmentation OOM (the other ran out of device memory)
  ASSERT_EQ(findings.size(), 6u);
  EXPECT_EQ(findings[0].rule, "leak");
  EXPECT_TRUE(findings[0].fails);
  EXPECT_NE(findings[0].message.find("/src/app.cpp:12"), std::string::npos) << findings[0].message;
  EXPECT_NE(findings[0].message.find("Alive at exit in a trace without step markers."), std::string::npos);
  EXPECT_FALSE(findings[1].fails);  // cached
  EXPECT_FALSE(findings[2].fails);  // suppressed
  EXPECT_EQ(findings[3].rule, "library");
  EXPECT_FALSE(findings[3].fails);  // a library's own memory never fails the check
  EXPECT_NE(findings[3].message.find("kept by a library for itself"), std::string::npos)
      << findings[3].message;
  EXPECT_EQ(findings[4].rule, "growth");
  EXPECT_TRUE(findings[4].fails);  // 1 MiB/step over 1000
  ASSERT_EQ(findings[4].advice.size(), 1u);
  EXPECT_NE(findings[4].message.find("step 1200"), std::string::npos);
  EXPECT_EQ(findings[5].rule, "fragmentation");
  ASSERT_EQ(findings[5].advice.size(), 1u);
  EXPECT_NE(findings[5].advice[0].find("expandable_segments"), std::string::npos);
  // Without a growth limit growth never fails; without leaks over the limit no leak fails.
  auto relaxed = an::ci_findings(report(), an::FailPolicy{false, std::nullopt});
  for (const auto& f : relaxed) EXPECT_FALSE(f.fails) << f.title;
}

TEST(Sarif, ResultsPerKindLocatedAtTheUserFrame) {
  json sarif = an::report_sarif(report(), an::FailPolicy{true, std::nullopt});
  EXPECT_EQ(sarif["version"], "2.1.0");
  EXPECT_EQ(sarif["runs"][0]["tool"]["driver"]["name"], "gpumemshim");
  EXPECT_EQ(sarif["runs"][0]["results"].size(), 6u);
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
  const json* library = result_of(sarif, "gpumemshim/library");
  ASSERT_TRUE(library);
  EXPECT_EQ((*library)["level"], "note");
  // Each result's ruleIndex names its rule.
  const json& rules = sarif["runs"][0]["tool"]["driver"]["rules"];
  for (const json& r : sarif["runs"][0]["results"]) EXPECT_EQ(rules[r["ruleIndex"].get<size_t>()]["id"], r["ruleId"]);
}

TEST(Junit, CountsMatchTestcasesAndFailures) {
  std::string xml = an::report_junit(report(), an::FailPolicy{true, 1.0});
  EXPECT_NE(xml.find("<testsuite name=\"gpumemshim.check\" tests=\"6\" failures=\"2\""),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("classname=\"gpumemshim.growth\""), std::string::npos);
  std::string clean = an::report_junit(an::Report{}, an::FailPolicy{});
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

namespace {

// Two traces the format-3 reader would flag: one with damaged blocks, one whose shim's write failed
// (ENOSPC), made by hand so that every writer is tested on them.
an::Report untrusted_report() {
  an::Report r = report();
  an::ProcessReport& damaged = r.processes[0];
  damaged.integrity.status = an::IntegrityStatus::kDamaged;
  damaged.integrity.name = "damaged";
  damaged.integrity.clean = false;
  damaged.integrity.checked = true;
  damaged.integrity.ended = true;
  damaged.integrity.damaged_blocks = 2;
  damaged.integrity.records_lost = 1234;
  damaged.integrity.detail = "damaged: 2 blocks failed their checksum at offset 4096 (1234 records lost)";
  an::ProcessReport& failed = r.processes.emplace_back();
  failed.trace = "/t/full.trace";
  failed.info.pid = 8;
  failed.integrity = an::integrity_of(
      gpumemshim::format::TraceIntegrity{.status = an::IntegrityStatus::kWriteFailed,
                                         .checked = true,
                                         .write_error = 28,
                                         .detail = "write-failed: the shim could not write every record"},
      gpumemshim::format::Version{3, 0});
  r.integrity = an::verdict_of(r.processes);
  return r;
}

}  // namespace

TEST(Integrity, VerdictIsTheWorstTrace) {
  an::Report r = untrusted_report();
  EXPECT_FALSE(r.integrity.trusted);
  EXPECT_EQ(r.integrity.not_clean, 2u);
  EXPECT_EQ(r.integrity.status, "write-failed");
  EXPECT_EQ(r.processes[1].integrity.write_error_text, "No space left on device");
  EXPECT_TRUE(an::verdict_of({}).trusted);
}

TEST(Integrity, EveryWriterShowsDamagedAndWriteFailedTraces) {
  const an::Report r = untrusted_report();
  const std::string text = an::report_text(r);
  EXPECT_EQ(text.rfind("WARNING: gpumemshim: 2 of 2 traces cannot be trusted in full (write-failed)", 0), 0u) << text;
  EXPECT_NE(text.find("WARNING: trace /t/a b.trace: damaged: 2 blocks failed their checksum"), std::string::npos);
  EXPECT_NE(text.find("WARNING: trace /t/full.trace: the shim's write failed: No space left on device"),
            std::string::npos) << text;

  const json j = an::report_json(r);
  EXPECT_EQ(j["integrity"]["status"], "write-failed");
  EXPECT_EQ(j["integrity"]["trusted"], false);
  EXPECT_EQ(j["integrity"]["problems"].size(), 2u);
  EXPECT_EQ(j["processes"][0]["integrity"]["damaged_blocks"], 2);
  EXPECT_EQ(j["processes"][0]["integrity"]["records_lost"], 1234);
  EXPECT_EQ(j["processes"][1]["integrity"]["write_error"], 28);
  EXPECT_EQ(j["processes"][1]["integrity"]["write_error_text"], "No space left on device");

  const std::string html = an::report_html(r);
  EXPECT_NE(html.find("class=\"banner\""), std::string::npos);
  EXPECT_NE(html.find("No space left on device"), std::string::npos);

  const std::string junit = an::report_junit(r, an::FailPolicy{false, std::nullopt});
  EXPECT_NE(junit.find("<testcase name=\"trace integrity\""), std::string::npos) << junit;
  EXPECT_NE(junit.find("<failure message=\"2 of 2 traces cannot be trusted in full (write-failed)\""),
            std::string::npos) << junit;
  EXPECT_NE(junit.find("failures=\"1\""), std::string::npos) << junit;
  EXPECT_EQ(junit.find("check passed"), std::string::npos) << junit;
  const std::string accepted = an::report_junit(r, an::FailPolicy{false, std::nullopt, true});
  EXPECT_NE(accepted.find("failures=\"0\""), std::string::npos) << accepted;
  EXPECT_NE(accepted.find("--allow-incomplete"), std::string::npos) << accepted;

  const json sarif = an::report_sarif(r, an::FailPolicy{false, std::nullopt});
  const json& inv = sarif["runs"][0]["invocations"][0];
  EXPECT_EQ(inv["executionSuccessful"], false);
  ASSERT_EQ(inv["toolExecutionNotifications"].size(), 2u);
  for (const json& n : inv["toolExecutionNotifications"]) EXPECT_EQ(n["level"], "error");
  EXPECT_NE(inv["toolExecutionNotifications"][1]["message"]["text"].get<std::string>().find(
                "No space left on device"),
            std::string::npos);

  an::Report clean = report();
  clean.integrity = an::verdict_of(clean.processes);
  const std::string diff = an::diff_text(an::diff_reports(clean, r), std::nullopt);
  EXPECT_NE(diff.find("WARNING: new trace /t/a b.trace: damaged"), std::string::npos) << diff;
  EXPECT_EQ(diff.find("WARNING: base"), std::string::npos) << diff;
  EXPECT_EQ(an::diff_json(an::diff_reports(r, clean), std::nullopt)["base"]["integrity"]["status"], "write-failed");
}

// Clean traces: no banner, no integrity testcase, a successful invocation.
TEST(Integrity, CleanReportsCarryNoWarning) {
  an::Report r = report();
  r.processes[0].integrity.name = "unchecked (format 2)";
  r.integrity = an::verdict_of(r.processes);
  EXPECT_EQ(an::report_text(r).find("WARNING"), std::string::npos);
  EXPECT_EQ(an::report_html(r).find("class=\"banner\""), std::string::npos);
  EXPECT_EQ(an::report_junit(r, an::FailPolicy{}).find("trace integrity"), std::string::npos);
  const json sarif = an::report_sarif(r, an::FailPolicy{});
  EXPECT_EQ(sarif["runs"][0]["invocations"][0]["executionSuccessful"], true);
  EXPECT_TRUE(sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"].empty());
}

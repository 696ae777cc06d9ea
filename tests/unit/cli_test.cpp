// Exit codes and output of the gpumemshim CLI on synthesized traces.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "trace_builder.h"

namespace gf = gpumemshim::format;
using gpumemshim::testing::TempDir;
using gpumemshim::testing::TraceBuilder;

namespace {

struct Result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs the CLI with args (each single-quoted for the shell).
Result cli(const TempDir& dir, const std::vector<std::string>& args) {
  std::string cmd = "'" GPUMEMSHIM_CLI "'";
  for (const std::string& a : args) cmd += " '" + a + "'";
  std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  cmd += " >'" + out + "' 2>'" + err + "'";
  int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// Runs a shell command line built around the CLI ("CLI" is replaced by its path); stdout and
// stderr are captured unless the line redirects them itself.
Result sh(const TempDir& dir, std::string line) {
  for (size_t at; (at = line.find("CLI")) != std::string::npos;)
    line.replace(at, 3, "'" GPUMEMSHIM_CLI "'");
  std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  std::string cmd = "{ " + line + " ; } >'" + out + "' 2>'" + err + "'";
  int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

void expect_one_line_error(const Result& r) {
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("gpumemshim: error:", 0), 0u) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

constexpr uint64_t kShim = 0x10000, kApp = 0x400000;

TraceBuilder trace(uint64_t pid, gf::Version version = gf::kVersion) {
  TraceBuilder t(version);
  t.process(pid, "app");
  t.module("/nonexistent/libgpumemshim.so", kShim, 0x10000);
  t.module("/nonexistent/leaky_app", kApp, 0x10000);
  t.stack(1, {kShim + 0x10, kApp + 0x100, kApp + 0x200});
  return t;
}

std::string clean_trace(const TempDir& dir) {
  TraceBuilder t = trace(1);
  t.alloc(0x1000, 4096, 1).free(0x1000).end();
  return t.write(dir.file("clean.trace"));
}

std::string leaky_trace(const TempDir& dir) {
  TraceBuilder t = trace(2);
  t.alloc(0x1000, 4096, 1).alloc(0x2000, 4096, 1).end();
  return t.write(dir.file("leaky.trace"));
}

// A run killed before it exited: a leak-like survivor and no End record.
std::string killed_trace(const TempDir& dir, const char* name = "killed.trace") {
  TraceBuilder t = trace(8);
  t.alloc(0x1000, 4096, 1).alloc(0x2000, 100, 1).free(0x2000);
  return t.write(dir.file(name));
}

}  // namespace

TEST(Cli, CheckExitCodes) {
  TempDir dir;
  std::string clean = clean_trace(dir), leaky = leaky_trace(dir);
  EXPECT_EQ(cli(dir, {"check", clean}).code, 0);
  Result leak = cli(dir, {"check", leaky});
  EXPECT_EQ(leak.code, 1);
  EXPECT_NE(leak.out.find("LEAK 8.00 KiB (8192 bytes) in 2 allocations via cudaMalloc"),
            std::string::npos)
      << leak.out;
  EXPECT_NE(leak.out.find("leaky_app"), std::string::npos) << leak.out;
  EXPECT_EQ(cli(dir, {"check", leaky, "--max-leak-bytes", "8192"}).code, 0);
  EXPECT_EQ(cli(dir, {"check", leaky, "--max-leak-bytes", "8191"}).code, 1);
  EXPECT_EQ(cli(dir, {"check", clean, leaky}).code, 1);
}

TEST(Cli, Suppressions) {
  TempDir dir;
  std::string leaky = leaky_trace(dir);
  std::ofstream(dir.file("ok.supp")) << "# known\nleak:leaky_app\n";
  std::ofstream(dir.file("other.supp")) << "leak:^something_else$\n";
  std::ofstream(dir.file("bad.supp")) << "leak:x\nbogus line\n";
  Result ok = cli(dir, {"check", leaky, "--suppressions", dir.file("ok.supp")});
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_EQ(cli(dir, {"check", leaky, "--suppressions", dir.file("other.supp")}).code, 1);
  Result bad = cli(dir, {"check", leaky, "--suppressions", dir.file("bad.supp")});
  expect_one_line_error(bad);
  EXPECT_NE(bad.err.find("bad.supp:2"), std::string::npos) << bad.err;
  expect_one_line_error(cli(dir, {"check", leaky, "--suppressions", dir.file("missing.supp")}));
}

TEST(Cli, UnusableInputsExitTwoWithOneLine) {
  TempDir dir;
  TraceBuilder empty;
  std::string empty_path = empty.write(dir.file("empty.trace"), 0);
  std::ofstream(dir.file("garbage.trace")) << "\x7f"
                                              "ELF this is not a trace at all, not at all";
  TraceBuilder newer = trace(3);
  newer.header_version(9, 0);
  newer.write(dir.file("newer.trace"));
  TraceBuilder corrupt = trace(4, gf::kVersion2_0);  // format 3 would call its block damaged
  corrupt.alloc(0x1000, 1).append_bytes(std::string_view("\0\0\0\0\0\0", 6)).alloc(0x2000, 1).end();
  corrupt.write(dir.file("corrupt.trace"));
  for (const char* name :
       {"empty.trace", "garbage.trace", "newer.trace", "corrupt.trace", "missing.trace"})
    for (const char* cmd : {"report", "check", "stats"}) {
      SCOPED_TRACE(std::string(cmd) + " " + name);
      expect_one_line_error(cli(dir, {cmd, dir.file(name)}));
    }
}

TEST(Cli, UsageErrors) {
  TempDir dir;
  std::string clean = clean_trace(dir);
  expect_one_line_error(cli(dir, {"check", clean, "--no-such-flag"}));
  expect_one_line_error(cli(dir, {"check"}));
  expect_one_line_error(cli(dir, {"check", clean, "--max-leak-bytes", "lots"}));
  expect_one_line_error(cli(dir, {"frobnicate"}));
  expect_one_line_error(cli(dir, {}));
  expect_one_line_error(cli(dir, {"report", clean, "--format", "xml"}));
  expect_one_line_error(cli(dir, {"report", clean, "-o", dir.file("no/such/dir/out.json")}));
  EXPECT_EQ(cli(dir, {"--help"}).code, 0);
  EXPECT_EQ(cli(dir, {"check", "--help"}).code, 0);
}

TEST(Cli, JsonReportHasTheContractKeys) {
  TempDir dir;
  std::string leaky = leaky_trace(dir);
  Result r = cli(dir, {"report", "--format", "json", leaky});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "gpumemshim-report/1");
  for (const char* k : {"processes", "summary", "leaks", "failures", "address_space", "growth",
                        "fragmentation", "recommendations"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["summary"]["leaked_bytes"], 8192);
  EXPECT_EQ(j["leaks"][0]["count"], 2);
  EXPECT_EQ(j["leaks"][0]["api"], "cudaMalloc");
  EXPECT_EQ(j["leaks"][0]["stack"][0]["module"], "/nonexistent/leaky_app");
  EXPECT_EQ(j["processes"][0]["clean_exit"], true);

  Result to_file = cli(dir, {"report", "--format", "json", "-o", dir.file("r.json"), leaky});
  ASSERT_EQ(to_file.code, 0) << to_file.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(dir.file("r.json")))["summary"]["leaked_bytes"], 8192);
}

TEST(Cli, TextReportAndStats) {
  TempDir dir;
  TraceBuilder t = trace(5, gf::kVersion2_0);  // a cut record, not a cut block
  t.alloc(0x1000, 3 << 20, 1)
      .alloc(0x2000, 64, 0, gf::Api::kCudaMallocManaged, gf::MemoryKind::kManaged);
  t.add(gf::MemInfoRecord{10, 0, 1, 2});
  std::string path = t.write(dir.file("t.trace"), t.bytes().size() - 2);  // cut the last record
  Result r = cli(dir, {"report", path});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("3145728"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("truncated"), std::string::npos) << r.out;
  Result s = cli(dir, {"stats", path});
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_NE(s.out.find("cudaMalloc "), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("cudaMallocManaged"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("truncated        yes"), std::string::npos) << s.out;
}

// `stats` counts allocations, frees, failures and bytes per API, and events whose API byte is out
// of range (a later shim's) as unknown, whatever path decoded them.
TEST(Cli, StatsCountsEachApiAndTheUnknownOnes) {
  TempDir dir;
  TraceBuilder t = trace(6);
  t.alloc(0x1000, 100, 1).alloc(0x2000, 200, 1).free(0x1000).failed(1 << 30);
  t.alloc(0x3000, 4096, 1, gf::Api::kCuMemAlloc).free(0x3000, gf::Api::kCuMemFree);
  t.alloc(0x4000, 999, 1, static_cast<gf::Api>(200)).free(0x4000, static_cast<gf::Api>(201));
  t.failed(64, 2, 1, static_cast<gf::Api>(202));
  t.end();
  Result s = cli(dir, {"stats", t.write(dir.file("apis.trace"))});
  ASSERT_EQ(s.code, 0) << s.err;
  auto row = [&](const std::string& api) {
    const size_t at = s.out.find("    " + api + " ");
    if (at == std::string::npos) return std::string();
    std::istringstream fields(s.out.substr(at, s.out.find('\n', at) - at));
    std::string name, allocs, frees, failed, bytes;
    fields >> name >> allocs >> frees >> failed >> bytes;
    return allocs + " " + frees + " " + failed + " " + bytes;
  };
  EXPECT_EQ(row("cudaMalloc"), "2 0 1 300") << s.out;
  EXPECT_EQ(row("cudaFree"), "0 1 0 0") << s.out;
  EXPECT_EQ(row("cuMemAlloc_v2"), "1 0 0 4096") << s.out;
  EXPECT_EQ(row("cuMemFree_v2"), "0 1 0 0") << s.out;
  EXPECT_NE(s.out.find("(events with an unknown api: 3)"), std::string::npos) << s.out;
}

// A killed run (no End record): check and diff refuse it with one line naming the file and what is
// wrong, unless --allow-incomplete; its survivors are "alive when the trace ended", not leaks.
TEST(Cli, KilledTraceIsRefusedUnlessAllowed) {
  TempDir dir;
  std::string killed = killed_trace(dir), clean = clean_trace(dir);
  Result refused = cli(dir, {"check", killed});
  expect_one_line_error(refused);
  EXPECT_TRUE(has(refused.err, killed + ": incomplete: no End record")) << refused.err;
  EXPECT_TRUE(has(refused.err, "--allow-incomplete")) << refused.err;
  EXPECT_EQ(refused.out, "");
  // With another, clean trace: still refused, naming the incomplete one only.
  Result both = cli(dir, {"check", clean, killed});
  expect_one_line_error(both);
  EXPECT_FALSE(has(both.err, clean)) << both.err;

  // Accepted: judged by the findings, and its survivors are no leaks even with a 0-byte limit.
  Result allowed = cli(dir, {"check", killed, "--allow-incomplete", "--max-leak-bytes", "0"});
  EXPECT_EQ(allowed.code, 0) << allowed.out << allowed.err;
  EXPECT_TRUE(has(allowed.out, "gpumemshim: note: " + killed + ": incomplete")) << allowed.out;
  EXPECT_TRUE(has(allowed.out, "0 bytes leaked")) << allowed.out;
  EXPECT_TRUE(has(allowed.out, "4096 bytes alive when the trace ended (not leaks)")) << allowed.out;
  // A real leak in another, clean trace still fails it.
  EXPECT_EQ(cli(dir, {"check", killed, leaky_trace(dir), "--allow-incomplete"}).code, 1);
}

TEST(Cli, KilledTraceReportSaysWhatItIs) {
  TempDir dir;
  std::string killed = killed_trace(dir);
  Result text = cli(dir, {"report", killed});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_EQ(
      text.out.rfind("WARNING: gpumemshim: 1 of 1 trace cannot be trusted in full (incomplete)", 0),
      0u)
      << text.out;
  EXPECT_TRUE(has(text.out, "WARNING: trace " + killed + ": incomplete: no End record"))
      << text.out;
  EXPECT_TRUE(has(text.out, "ALIVE WHEN THE TRACE ENDED 4.00 KiB (4096 bytes)")) << text.out;
  EXPECT_FALSE(has(text.out, "LEAK ")) << text.out;

  Result j = cli(dir, {"report", "--format", "json", killed});
  ASSERT_EQ(j.code, 0) << j.err;
  auto r = nlohmann::json::parse(j.out);
  EXPECT_EQ(r["integrity"]["status"], "incomplete");
  EXPECT_EQ(r["integrity"]["trusted"], false);
  EXPECT_EQ(r["integrity"]["not_clean"], 1);
  const auto& integrity = r["processes"][0]["integrity"];
  EXPECT_EQ(integrity["status"], "incomplete");
  EXPECT_EQ(integrity["clean"], false);
  EXPECT_EQ(integrity["ended"], false);
  EXPECT_EQ(integrity["checked"], true);  // format 3: its blocks were checked
  EXPECT_TRUE(has(integrity["detail"].get<std::string>(), "no End record"));
  EXPECT_EQ(r["summary"]["leaked_bytes"], 0);
  EXPECT_EQ(r["summary"]["alive_at_trace_end_bytes"], 4096);
  ASSERT_EQ(r["leaks"].size(), 1u);
  EXPECT_EQ(r["leaks"][0]["kind"], "alive");
  EXPECT_TRUE(has(r["leaks"][0]["reason"].get<std::string>(), "alive when the trace ended"));

  Result html = cli(dir, {"report", "--format", "html", killed});
  ASSERT_EQ(html.code, 0) << html.err;
  const size_t banner = html.out.find("<div class=\"banner\" id=\"integrity\">");
  ASSERT_NE(banner, std::string::npos) << html.out;
  EXPECT_LT(banner, html.out.find("<div class=\"cards\">"));
  EXPECT_TRUE(has(html.out, "incomplete: no End record")) << html.out;

  // stats shows it too.
  Result st = cli(dir, {"stats", killed});
  ASSERT_EQ(st.code, 0) << st.err;
  EXPECT_TRUE(has(st.out, "no End record")) << st.out;
}

TEST(Cli, KilledTraceInJunitAndSarif) {
  TempDir dir;
  std::string killed = killed_trace(dir);
  std::string junit = dir.file("j.xml"), sarif = dir.file("s.sarif");
  Result refused = cli(dir, {"check", killed, "--junit", junit, "--sarif", sarif});
  expect_one_line_error(refused);
  std::string xml = slurp(junit);
  EXPECT_TRUE(has(xml, "<testcase name=\"trace integrity\" classname=\"gpumemshim.integrity\""))
      << xml;
  EXPECT_TRUE(has(xml, "<failure message=\"1 of 1 trace cannot be trusted in full (incomplete)\""))
      << xml;
  EXPECT_TRUE(has(xml, "failures=\"1\"")) << xml;
  auto s = nlohmann::json::parse(slurp(sarif));
  const auto& inv = s["runs"][0]["invocations"][0];
  EXPECT_EQ(inv["executionSuccessful"], false);
  ASSERT_EQ(inv["toolExecutionNotifications"].size(), 1u);
  EXPECT_EQ(inv["toolExecutionNotifications"][0]["level"], "error");
  EXPECT_TRUE(has(inv["toolExecutionNotifications"][0]["message"]["text"].get<std::string>(),
                  "incomplete"));
  for (const auto& result : s["runs"][0]["results"]) {
    EXPECT_EQ(result["ruleId"], "gpumemshim/alive");
    EXPECT_EQ(result["level"], "note");
  }

  Result allowed =
      cli(dir, {"check", killed, "--allow-incomplete", "--junit", junit, "--sarif", sarif});
  EXPECT_EQ(allowed.code, 0) << allowed.err;
  xml = slurp(junit);
  EXPECT_TRUE(has(xml, "<testcase name=\"trace integrity\"")) << xml;
  EXPECT_TRUE(has(xml, "failures=\"0\"")) << xml;
  EXPECT_TRUE(has(xml, "alive when the trace ended")) << xml;
}

TEST(Cli, DiffRefusesAnIncompleteSideUnlessAllowed) {
  TempDir dir;
  std::string killed = killed_trace(dir), clean = clean_trace(dir);
  Result refused = cli(dir, {"diff", clean, killed});
  expect_one_line_error(refused);
  EXPECT_TRUE(has(refused.err, "new trace " + killed + ": incomplete")) << refused.err;
  Result base = cli(dir, {"diff", killed, clean});
  expect_one_line_error(base);
  EXPECT_TRUE(has(base.err, "base trace " + killed + ": incomplete")) << base.err;
  Result allowed = cli(dir, {"diff", clean, killed, "--allow-incomplete"});
  EXPECT_EQ(allowed.code, 0) << allowed.err;
  EXPECT_TRUE(has(allowed.out, "WARNING: new trace " + killed + ": incomplete")) << allowed.out;
  Result j = cli(dir, {"diff", clean, killed, "--allow-incomplete", "--format", "json"});
  ASSERT_EQ(j.code, 0) << j.err;
  auto d = nlohmann::json::parse(j.out);
  EXPECT_EQ(d["new"]["integrity"]["trusted"], false);
  EXPECT_EQ(d["base"]["integrity"]["trusted"], true);
}

// A run that ended normally without a single CUDA memory event is clean, and says so.
TEST(Cli, NoEventsIsCleanAndSaid) {
  TempDir dir;
  TraceBuilder t = trace(9);
  t.end();
  std::string path = t.write(dir.file("idle.trace"));
  Result c = cli(dir, {"check", path});
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_TRUE(has(c.out, "no CUDA memory events were recorded")) << c.out;
  Result text = cli(dir, {"report", path});
  EXPECT_TRUE(has(text.out, "note: no CUDA memory events were recorded")) << text.out;
  EXPECT_FALSE(has(text.out, "WARNING")) << text.out;
  auto j = nlohmann::json::parse(cli(dir, {"report", "--format", "json", path}).out);
  EXPECT_EQ(j["processes"][0]["no_memory_events"], true);
  EXPECT_EQ(j["integrity"]["trusted"], true);
  EXPECT_EQ(j["integrity"]["status"], "complete");
}

// The same trace given twice, by path, link or copy, is counted once and noted.
TEST(Cli, SameTraceTwiceIsCountedOnce) {
  TempDir dir;
  std::string leaky = leaky_trace(dir);
  std::filesystem::create_symlink(leaky, dir.file("soft.trace"));
  std::filesystem::create_hard_link(leaky, dir.file("hard.trace"));
  std::filesystem::copy_file(leaky, dir.file("copy.trace"));
  for (const char* other : {"leaky.trace", "soft.trace", "hard.trace", "copy.trace"}) {
    SCOPED_TRACE(other);
    const std::string second = dir.file(other);
    auto j = nlohmann::json::parse(cli(dir, {"report", "--format", "json", leaky, second}).out);
    ASSERT_EQ(j["processes"].size(), 1u);
    EXPECT_EQ(j["summary"]["leaked_bytes"], 8192);
    ASSERT_EQ(j["integrity"]["duplicates"].size(), 1u);
    EXPECT_EQ(j["integrity"]["duplicates"][0]["same_as"], leaky);
    ASSERT_EQ(j["notes"].size(), 1u);
    EXPECT_EQ(j["notes"][0],
              "trace " + second + " is " +
                  (std::string(other) == "copy.trace" ? "the same recording" : "the same file") +
                  " as " + leaky + ": counted once");
    Result text = cli(dir, {"report", leaky, second});
    EXPECT_TRUE(has(text.out, "note: trace " + second)) << text.out;
    EXPECT_TRUE(has(text.out, "SUMMARY: gpumemshim: 8.00 KiB (8192 bytes) leaked")) << text.out;
    Result c = cli(dir, {"check", leaky, second, "--max-leak-bytes", "8192", "--junit",
                         dir.file("j.xml"), "--sarif", dir.file("s.sarif")});
    EXPECT_EQ(c.code, 0) << c.out << c.err;
    EXPECT_TRUE(has(c.out, "counted once")) << c.out;
    EXPECT_TRUE(has(slurp(dir.file("j.xml")), "counted once"));
    auto s = nlohmann::json::parse(slurp(dir.file("s.sarif")));
    EXPECT_EQ(s["runs"][0]["invocations"][0]["toolExecutionNotifications"][0]["level"], "note");
  }
}

TEST(Cli, NumericFlagsRejectNegativesOverflowAndJunk) {
  TempDir dir;
  std::string clean = clean_trace(dir);
  struct Case {
    std::vector<std::string> args;
    std::string flag;
  };
  const std::vector<std::string> bad = {
      "-1", "18446744073709551616", "12abc", "1.5", "", " 7", "0x10", "1e3"};
  for (const std::string& v : bad) {
    for (const Case& c :
         {Case{{"check", clean, "--max-leak-bytes", v}, "--max-leak-bytes"},
          Case{{"check", clean, "--max-growth-bytes-per-step", v}, "--max-growth-bytes-per-step"},
          Case{{"report", clean, "--jobs", v}, "--jobs"},
          Case{{"report", clean, "-j", v}, "--jobs"}}) {
      SCOPED_TRACE(c.flag + " '" + v + "'");
      Result r = cli(dir, c.args);
      expect_one_line_error(r);
      EXPECT_TRUE(has(r.err, "gpumemshim: error: " + c.flag + ": '" + v + "' is ")) << r.err;
    }
  }
  Result eq = cli(dir, {"check", clean, "--max-leak-bytes=-1"});
  expect_one_line_error(eq);
  EXPECT_EQ(eq.err, "gpumemshim: error: --max-leak-bytes: '-1' is not a byte count\n");
  for (const std::string v : {"-5", "nan", "inf", "5%", "abc", "", "1e400"}) {
    SCOPED_TRACE(v);
    Result r = cli(dir, {"diff", clean, clean, "--fail-on-regression", v});
    expect_one_line_error(r);
    EXPECT_TRUE(has(r.err, "--fail-on-regression: '" + v + "' is not a percentage")) << r.err;
  }
  // What is valid still works.
  EXPECT_EQ(cli(dir, {"check", clean, "--max-leak-bytes", "18446744073709551615"}).code, 0);
  EXPECT_EQ(cli(dir, {"check", clean, "--max-growth-bytes-per-step", "0"}).code, 0);
  EXPECT_EQ(cli(dir, {"report", clean, "--jobs", "3"}).code, 0);
  EXPECT_EQ(cli(dir, {"diff", clean, clean, "--fail-on-regression", "2.5"}).code, 0);
  EXPECT_EQ(cli(dir, {"diff", clean, clean, "--fail-on-regression", "0"}).code, 0);
}

// The reader's thread count is an environment variable: a typo is an error, not the default.
TEST(Cli, ReadThreadsMustBeACount) {
  TempDir dir;
  std::string clean = clean_trace(dir);
  for (const std::string v : {"-1", "x", "2.5", "65", "18446744073709551616"}) {
    SCOPED_TRACE(v);
    Result r = sh(dir, "GPUMEMSHIM_READ_THREADS='" + v + "' CLI report '" + clean + "'");
    expect_one_line_error(r);
    EXPECT_TRUE(has(r.err, "gpumemshim: error: GPUMEMSHIM_READ_THREADS: '" + v + "' is ")) << r.err;
  }
  for (const std::string v : {"0", "1", "64"})
    EXPECT_EQ(sh(dir, "GPUMEMSHIM_READ_THREADS=" + v + " CLI check '" + clean + "'").code, 0) << v;
}

TEST(Cli, SuppressionsMustBeARegularTextFile) {
  TempDir dir;
  std::string leaky = leaky_trace(dir);
  std::filesystem::create_directory(dir.file("supp.d"));
  std::ofstream(dir.file("nul.supp"), std::ios::binary)
      << std::string("leak:x\n\0\0SECRETBINARY\n", 22);
  std::ofstream(dir.file("utf8.supp"), std::ios::binary) << "leak:x\nleak:\xff\xfeSECRETBINARY\n";
  std::ofstream(dir.file("ok-utf8.supp"), std::ios::binary) << "# caf\xc3\xa9\nleak:leaky_app\n";
  std::ofstream(dir.file("unknown.supp")) << "leak:x\nrace:foo\n";
  std::ofstream(dir.file("nocolon.supp")) << "leak:x\n\njust words\n";
  struct Case {
    std::string path, says;
  };
  for (const Case& c :
       {Case{dir.file("supp.d"), "is a directory"}, Case{"/dev/null", "not a regular file"},
        Case{dir.file("nul.supp"), "not a text file (a NUL byte or invalid UTF-8 at byte 7)"},
        Case{dir.file("utf8.supp"), "not a text file (a NUL byte or invalid UTF-8 at byte 12)"},
        Case{dir.file("unknown.supp"), "unknown.supp:2: not a suppression rule: 'race:foo'"},
        Case{dir.file("nocolon.supp"), "nocolon.supp:3: not a suppression rule: 'just words'"}}) {
    for (const char* cmd : {"check", "report"}) {
      SCOPED_TRACE(std::string(cmd) + " " + c.path);
      Result r = cli(dir, {cmd, leaky, "--suppressions", c.path});
      expect_one_line_error(r);
      EXPECT_TRUE(has(r.err, c.says)) << r.err;
      EXPECT_FALSE(has(r.err, "SECRETBINARY")) << r.err;
      EXPECT_EQ(r.out, "");
    }
  }
  EXPECT_EQ(cli(dir, {"check", leaky, "--suppressions", dir.file("ok-utf8.supp")}).code, 0);
}

// A full disk: the error is the one of the write that failed, in every output path.
TEST(Cli, WriteErrorsNameTheFailedWrite) {
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  TempDir dir;
  std::string clean = clean_trace(dir), leaky = leaky_trace(dir);
  const std::vector<std::vector<std::string>> runs = {
      {"report", clean, "-o", "/dev/full"},
      {"report", clean, "--format", "json", "-o", "/dev/full"},
      {"report", clean, "--format", "html", "-o", "/dev/full"},
      {"check", clean, "--junit", "/dev/full"},
      {"check", leaky, "--sarif", "/dev/full"},
      {"diff", clean, leaky, "-o", "/dev/full"},
      {"export", clean, "--to", "chrome", "-o", "/dev/full"},
  };
  for (const auto& args : runs) {
    SCOPED_TRACE(args[0] + " " + args[args.size() - 2]);
    Result r = cli(dir, args);
    expect_one_line_error(r);
    EXPECT_EQ(r.err, "gpumemshim: error: /dev/full: cannot write: No space left on device\n");
  }
  // stdout itself on a full disk.
  for (const std::string& cmd :
       {"report " + clean, "check " + clean, "stats " + clean, "diff " + clean + " " + leaky}) {
    SCOPED_TRACE(cmd);
    Result r = sh(dir, "CLI " + cmd + " >/dev/full");
    expect_one_line_error(r);
    EXPECT_EQ(r.err, "gpumemshim: error: <stdout>: cannot write: No space left on device\n");
  }
}

// Exit codes and output of the gpumemshim CLI on synthesized traces.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

}  // namespace

TEST(Cli, CheckExitCodes) {
  TempDir dir;
  std::string clean = clean_trace(dir), leaky = leaky_trace(dir);
  EXPECT_EQ(cli(dir, {"check", clean}).code, 0);
  Result leak = cli(dir, {"check", leaky});
  EXPECT_EQ(leak.code, 1);
  EXPECT_NE(leak.out.find("LEAK 8.00 KiB (8192 bytes) in 2 allocations via cudaMalloc"), std::string::npos)
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
  std::ofstream(dir.file("garbage.trace")) << "\x7f" "ELF this is not a trace at all, not at all";
  TraceBuilder newer = trace(3);
  newer.header_version(9, 0);
  newer.write(dir.file("newer.trace"));
  TraceBuilder corrupt = trace(4, gf::kVersion2_0);  // format 3 would call its block damaged
  corrupt.alloc(0x1000, 1).append_bytes(std::string_view("\0\0\0\0\0\0", 6)).alloc(0x2000, 1).end();
  corrupt.write(dir.file("corrupt.trace"));
  for (const char* name : {"empty.trace", "garbage.trace", "newer.trace", "corrupt.trace", "missing.trace"})
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
  t.alloc(0x1000, 3 << 20, 1).alloc(0x2000, 64, 0, gf::Api::kCudaMallocManaged, gf::MemoryKind::kManaged);
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

// Honest verdicts through the analyzer's report, on traces the shim recorded
// (record_property_traces.py): every single-byte flip, every cut, every 3-byte overwrite and every
// bit flip of the file header gives either the intact trace's report or a declared problem — the
// analysis refuses the file (TraceError) or its verdict says the trace is not clean. Never a clean
// verdict on different findings or numbers. A few of the damaged files then go through
// `gpumemshim check`, which must refuse them in one line naming the file and the problem.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gpumemshim/analyzer/analyze.h"
#include "gpumemshim/analyzer/errors.h"
#include "gpumemshim/analyzer/render.h"
#include "gpumemshim/format/block.h"
#include "temp_dir.h"

namespace an = gpumemshim::analyzer;
namespace gf = gpumemshim::format;
using gpumemshim::testing::TempDir;
using nlohmann::json;

namespace {

// Sanitizer builds damage every byte of the file and block headers but only every Nth byte of
// the payloads (where any damage fails a checksum); GPUMEMSHIM_PROPERTY_STRIDE overrides it.
size_t stride() {
  if (const char* v = std::getenv("GPUMEMSHIM_PROPERTY_STRIDE"); v && std::atoi(v) > 0)
    return static_cast<size_t>(std::atoi(v));
  return GPUMEMSHIM_PROPERTY_DEFAULT_STRIDE;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Rewritten in place, then cut to size: truncating to zero first would make ext4 flush the file
// to disk on close (its guard for files replaced by truncation), at every one of the cases.
void write_file(const std::string& path, const std::vector<uint8_t>& bytes, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  const bool ok = fd >= 0 && ::pwrite(fd, bytes.data(), size, 0) == static_cast<ssize_t>(size) &&
                  ::ftruncate(fd, static_cast<off_t>(size)) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) throw std::runtime_error("cannot write " + path);
}

// The bytes that are framing rather than payload: the file header and each block header.
std::vector<bool> framing(const std::vector<uint8_t>& bytes, size_t& blocks) {
  std::vector<bool> out(bytes.size(), false);
  for (size_t i = 0; i < gf::kHeaderSizeV3 && i < bytes.size(); ++i) out[i] = true;
  blocks = 0;
  for (size_t at = gf::kHeaderSizeV3; at + gf::kBlockHeaderSize <= bytes.size();) {
    gf::BlockHeader h;
    if (!gf::decode_block_header(bytes.data() + at, h)) break;
    for (size_t i = 0; i < gf::kBlockHeaderSize; ++i) out[at + i] = true;
    ++blocks;
    at += gf::kBlockHeaderSize + h.stored_size;
  }
  return out;
}

// What a user sees of a report: the JSON report (with timelines, as `report --format json` makes
// it) and the record counts `stats` shows, without what belongs to the file rather than to what
// was recorded: its integrity (the verdict under test) and the format version in its header (a
// later minor version is read as this one, by design).
json visible(const an::Report& r) {
  json j = an::report_json(r);
  j.erase("integrity");
  for (json& p : j["processes"]) {
    p.erase("integrity");
    p.erase("format_version");
  }
  json stats = json::array();
  for (const an::ProcessReport& p : r.processes)
    stats.push_back({{"records", p.stats.records},
                     {"by_type", p.stats.by_type},
                     {"unknown_records", p.stats.unknown_records},
                     {"unknown_api", p.stats.unknown_api}});
  j["stats"] = std::move(stats);
  return j;
}

enum class Outcome { kSame, kDeclared, kRejected };

struct Tally {
  uint64_t same = 0, declared = 0, rejected = 0;
  uint64_t total() const { return same + declared + rejected; }
  void add(Outcome o) {
    ++(o == Outcome::kSame ? same : o == Outcome::kDeclared ? declared : rejected);
  }
  std::string text() const {
    return std::to_string(total()) + " (intact " + std::to_string(same) + ", declared " +
           std::to_string(declared) + ", rejected " + std::to_string(rejected) + ")";
  }
};

// A damaged file kept for the CLI: its bytes and what the analysis said of it.
struct Kept {
  std::string what;
  std::vector<uint8_t> bytes;
  Outcome outcome;
  std::string problem;  // the verdict's problem line, or the error
};

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

Result check_cli(const TempDir& dir, const std::string& trace) {
  std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  std::string cmd = "'" GPUMEMSHIM_CLI "' check --max-leak-bytes 0 '" + trace + "' >'" + out +
                    "' 2>'" + err + "'";
  int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// The first clause of a problem line ("<trace>: <what>; ..."), without its figures: the kinds of
// damage a trace showed, for picking distinct ones.
std::string kind_of(const std::string& problem) {
  const size_t colon = problem.find(": ");
  std::string first = colon == std::string::npos ? problem : problem.substr(colon + 2);
  first = first.substr(0, first.find(';'));
  std::string out;
  for (char c : first)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != ',') out += c;
  return out;
}

enum Class { kByteFlip, kBitFlip, kCut, kOverwrite, kClasses };

class Property {
 public:
  Property(const std::string& path, const std::vector<uint8_t>& whole) : path_(path) {
    opts_.jobs = 1;
    opts_.timelines = true;
    write_file(path_, whole, whole.size());
    an::Report r = an::analyze({path_}, opts_);
    EXPECT_TRUE(r.integrity.trusted) << r.integrity.status;
    EXPECT_EQ(r.integrity.status, "complete");
    EXPECT_EQ(r.processes.size(), 1u);
    intact_ = visible(r);
    intact_leaked_ = r.summary.leaked_bytes;
  }

  // Analyses the first `size` bytes of `bytes`, damaged at byte `at`, as the trace; counts the
  // outcome.
  void judge(const std::vector<uint8_t>& bytes, size_t size, size_t at, Class c,
             const std::string& what) {
    write_file(path_, bytes, size);
    an::Report r;
    try {
      r = an::analyze({path_}, opts_);
    } catch (const an::TraceError& e) {
      keep(bytes, size, at, c, what, Outcome::kRejected, e.what());
      return;
    }
    if (!r.integrity.trusted) {
      EXPECT_EQ(r.integrity.not_clean, 1u) << what;
      EXPECT_FALSE(r.processes.at(0).integrity.clean) << what;
      EXPECT_EQ(r.integrity.problems.size(), 1u) << what;
      keep(bytes, size, at, c, what, Outcome::kDeclared,
           r.integrity.problems.empty() ? "" : r.integrity.problems[0]);
      return;
    }
    json seen = visible(r);
    if (seen != intact_ && ++silent_ <= 5)
      ADD_FAILURE() << what << ": the verdict is clean (" << r.integrity.status
                    << ") but the report differs: "
                    << json::diff(intact_, seen).dump().substr(0, 2000);
    keep(bytes, size, at, c, what, Outcome::kSame, "");
  }

  const Tally& tally(Class c) const { return tallies_[c]; }

  uint64_t silent() const { return silent_; }
  const std::vector<Kept>& kept() const { return kept_; }
  uint64_t intact_leaked() const { return intact_leaked_; }

 private:
  // Counts the outcome; keeps for the CLI, of each class, the first rejected file, the first
  // declared one damaged in the file header and the first two damaged after it, each with a kind of
  // problem not kept yet, and the first file read as intact.
  void keep(const std::vector<uint8_t>& bytes, size_t size, size_t at, Class c,
            const std::string& what, Outcome o, const std::string& problem) {
    tallies_[c].add(o);
    static constexpr int kLimit[] = {1, 1, 2};
    const int slot = o == Outcome::kRejected ? 0 : at < gf::kHeaderSizeV3 ? 1 : 2;
    int& taken = o == Outcome::kSame ? same_taken_ : taken_[c][slot];
    if (taken >= (o == Outcome::kSame ? 1 : kLimit[slot]) ||
        (o != Outcome::kSame && !kinds_.insert(kind_of(problem)).second))
      return;
    ++taken;
    kept_.push_back(
        {what,
         std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size)), o,
         problem});
  }

  std::string path_;
  an::AnalyzeOptions opts_;
  json intact_;
  uint64_t intact_leaked_ = 0;
  uint64_t silent_ = 0;
  Tally tallies_[kClasses];
  int taken_[kClasses][3] = {};
  int same_taken_ = 0;
  std::set<std::string> kinds_;
  std::vector<Kept> kept_;
};

class ReportIntegrity : public ::testing::TestWithParam<std::string> {};

TEST_P(ReportIntegrity, NoDamageChangesTheReportInSilence) {
  const std::string source = std::string(GPUMEMSHIM_PROPERTY_TRACES) + "/" + GetParam() + ".trace";
  ASSERT_TRUE(std::filesystem::exists(source))
      << source
      << " is recorded by the CTest fixture integration.property_traces (ctest runs it first)";
  const std::vector<uint8_t> whole = read_file(source);
  ASSERT_GT(whole.size(), gf::kHeaderSizeV3);
  size_t blocks = 0;
  const std::vector<bool> header = framing(whole, blocks);
  const size_t every = stride();
  // Every position in Release; in sanitizer builds the framing's and every Nth of the rest.
  auto chosen = [&](size_t at) {
    return every == 1 || (at < header.size() && header[at]) || at % every == 0;
  };

  TempDir dir;
  const std::string trace = dir.file(GetParam() + ".trace");
  const auto start = std::chrono::steady_clock::now();
  Property property(trace, whole);
  std::vector<uint8_t> b = whole;
  for (size_t i = 0; i < whole.size(); ++i) {
    if (!chosen(i)) continue;
    b[i] ^= 0xFF;
    property.judge(b, b.size(), i, kByteFlip, "flip of byte " + std::to_string(i));
    b[i] = whole[i];
  }
  // The file header is the one part no checksum covers: each of its bits.
  for (size_t i = 0; i < gf::kHeaderSizeV3; ++i)
    for (int bit = 0; bit < 8; ++bit) {
      b[i] ^= static_cast<uint8_t>(1u << bit);
      property.judge(b, b.size(), i, kBitFlip,
                     "flip of bit " + std::to_string(bit) + " of byte " + std::to_string(i));
      b[i] = whole[i];
    }
  for (size_t n = 0; n < whole.size(); ++n)
    if (chosen(n)) property.judge(whole, n, n, kCut, "cut to " + std::to_string(n) + " bytes");
  // Each window with zeros, with ones and with bytes of a fixed-seed generator; a fill that would
  // leave the bytes as they were (zeros over zeros) is inverted, so that every case is damage.
  uint32_t seed = 2024;
  for (int fill : {0x00, 0xFF, -1})
    for (size_t i = 0; i + 3 <= whole.size(); ++i) {
      if (!chosen(i)) continue;
      for (size_t k = 0; k < 3; ++k) {
        seed = seed * 1664525u + 1013904223u;
        b[i + k] = fill >= 0 ? static_cast<uint8_t>(fill) : static_cast<uint8_t>(seed >> 24);
      }
      if (std::equal(b.begin() + static_cast<std::ptrdiff_t>(i),
                     b.begin() + static_cast<std::ptrdiff_t>(i + 3),
                     whole.begin() + static_cast<std::ptrdiff_t>(i)))
        for (size_t k = 0; k < 3; ++k) b[i + k] ^= 0xFF;
      property.judge(b, b.size(), i, kOverwrite,
                     "overwrite of bytes " + std::to_string(i) + ".." + std::to_string(i + 2) +
                         " (fill " + std::to_string(fill) + ")");
      for (size_t k = 0; k < 3; ++k) b[i + k] = whole[i + k];
    }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(property.silent(), 0u)
      << "damaged traces whose clean report differs from the intact one";

  const Tally &flips = property.tally(kByteFlip), &bits = property.tally(kBitFlip),
              &cuts = property.tally(kCut), &overwrites = property.tally(kOverwrite);
  if (every == 1) {  // the counts: every byte flipped, every cut, every 3-byte window
    EXPECT_EQ(flips.total(), whole.size());
    EXPECT_EQ(cuts.total(), whole.size());
    EXPECT_EQ(overwrites.total(), 3 * (whole.size() - 2));
  }
  EXPECT_EQ(bits.total(), 8 * gf::kHeaderSizeV3);
  // Several blocks: the reader's resynchronisation and its sequence and End counts are exercised.
  EXPECT_GE(blocks, 3u);
  // Damage is caught, not merely harmless: only the header's bytes no reader looks at (its
  // reserved bytes, unused flags, the minor version) may read as the intact trace.
  EXPECT_LE(flips.same, gf::kHeaderSizeV3);
  EXPECT_EQ(cuts.same, 0u);

  const uint64_t cases = flips.total() + bits.total() + cuts.total() + overwrites.total();
  const std::pair<const char*, const Tally*> classes[] = {
      {"byte_flips", &flips}, {"bit_flips", &bits}, {"cuts", &cuts}, {"overwrites", &overwrites}};
  for (auto [name, t] : classes) {
    RecordProperty(std::string(name) + "_intact", static_cast<int>(t->same));
    RecordProperty(std::string(name) + "_declared", static_cast<int>(t->declared));
    RecordProperty(std::string(name) + "_rejected", static_cast<int>(t->rejected));
  }
  RecordProperty("cases", static_cast<int>(cases));
  std::printf(
      "[ property ] %s: %zu bytes, %zu blocks, every %zu: byte flips %s, header bit flips %s, "
      "cuts %s, 3-byte overwrites %s; %llu cases in %.1f s\n",
      GetParam().c_str(), whole.size(), blocks, every, flips.text().c_str(), bits.text().c_str(),
      cuts.text().c_str(), overwrites.text().c_str(), static_cast<unsigned long long>(cases),
      seconds);

  // The same files through `gpumemshim check --max-leak-bytes 0`: a declared problem or a refused
  // file is exit 2 and one line naming the file and what is wrong; a damaged file read as intact
  // is judged as the intact one.
  const int intact_code = property.intact_leaked() > 0 ? 1 : 0;
  for (const Kept& k : property.kept()) {
    write_file(trace, k.bytes, k.bytes.size());
    Result r = check_cli(dir, trace);
    if (k.outcome == Outcome::kSame) {
      EXPECT_EQ(r.code, intact_code) << k.what << "\n" << r.err;
      continue;
    }
    EXPECT_EQ(r.code, 2) << k.what << "\n" << r.out << r.err;
    EXPECT_EQ(r.err.rfind("gpumemshim: error: " + trace + ": ", 0), 0u) << k.what << "\n" << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << k.what << ": one line\n" << r.err;
    EXPECT_NE(r.err.find(k.problem), std::string::npos) << k.what << ": " << k.problem << "\n"
                                                        << r.err;
  }
  RecordProperty("through_check", static_cast<int>(property.kept().size()));
  std::printf("[ property ] %s: %zu damaged files through gpumemshim check\n", GetParam().c_str(),
              property.kept().size());
  EXPECT_GE(property.kept().size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(Recorded, ReportIntegrity,
                         ::testing::Values("steps", "threads", "torch", "vmm"),
                         [](const auto& info) { return info.param; });

}  // namespace

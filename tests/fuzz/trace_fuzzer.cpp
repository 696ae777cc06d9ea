// libFuzzer target over the trace reader and the analysis: each input is written as a trace file,
// analysed as `gpumemshim report` and `gpumemshim check` analyse it, and rendered as the text
// report plus one of the other writers (JSON, SARIF, HTML, JUnit). A TraceError (the analyzer's)
// or TraceReadError (the reader's) is the expected outcome of an unusable trace; any other
// exception, a sanitizer report or a broken invariant of the integrity verdicts is a bug
// (tests/fuzz/run.sh; docs/benchmarks.md "Fuzzing").
//
// A byte of the header that the reader ignores holds the target's controls (controls.h): which
// writer renders the report, with which CI policy, and whether format 3's block checksums are
// recomputed first, so that mutations reach the records behind them. One writer per input rather
// than all four: under the sanitizers the JSON and SARIF writers cost more than the read and the
// analysis together (a thousand allocations for a report of nothing), so one writer each time
// gives the reader and the analysis almost three times the inputs per second, and each writer
// still two thirds of the reports it would render if every input went through all four.
//
// Built by CMake with GPUMEMSHIM_FUZZ=ON (clang, the `fuzz` preset). With GPUMEMSHIM_FUZZ_MAIN (any
// build) main() replays files instead: the seeds' test, and a loop for profiling.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "controls.h"
#include "gpumemshim/analyzer/analyze.h"
#include "gpumemshim/analyzer/errors.h"
#include "gpumemshim/analyzer/render.h"
#include "gpumemshim/format/block.h"
#include "gpumemshim/format/trace_reader.h"

namespace an = gpumemshim::analyzer;
namespace gf = gpumemshim::format;

namespace {

// The trace file every input is written to: one per fuzzing process, in $TMPDIR (tests/fuzz/run.sh
// points it at its work directory), else in memory when /dev/shm is there; removed at exit.
class TraceFile {
 public:
  TraceFile() {
    const char* dir = std::getenv("TMPDIR");
    if (!dir || !*dir) dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    path_ = std::string(dir) + "/gpumemshim-fuzz-" + std::to_string(getpid()) + ".trace";
    fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) std::abort();
  }
  ~TraceFile() {
    close(fd_);
    unlink(path_.c_str());
  }
  // The file holds exactly these bytes. The descriptor stays open: no open/close per input.
  void write(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, static_cast<off_t>(size)) != 0) std::abort();
    for (size_t done = 0; done < size;) {
      ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

TraceFile& trace_file() {
  static TraceFile file;
  return file;
}

// A broken invariant is a crash, for the fuzzer to keep the input.
#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "broken invariant: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      __builtin_trap();                                                                  \
    }                                                                                    \
  } while (0)

// What a user relies on in an integrity verdict (docs/trace-format.md "Integrity"), checked on
// every process of every report.
void check_integrity(const an::Report& report) {
  size_t not_clean = 0;
  for (const an::ProcessReport& p : report.processes) {
    const an::Integrity& i = p.integrity;
    // "complete" vouches that everything written was read: nothing was skipped, damaged, missing,
    // lost or cut, and the End record was read.
    if (i.status == gf::IntegrityStatus::kComplete) {
      FUZZ_CHECK(i.checked && i.ended && !i.truncated && !p.truncated);
      FUZZ_CHECK(i.skipped_bytes == 0 && i.damaged_blocks == 0 && i.missing_blocks == 0);
      FUZZ_CHECK(i.records_lost == 0 && i.first_problem_offset == 0);
    }
    // A checked trace (format 3) is clean only when complete: any data skipped, damaged, missing,
    // lost or cut off makes it unclean. Formats 1 and 2 have no checksums: clean means ended.
    if (i.checked) {
      if (i.skipped_bytes || i.damaged_blocks || i.missing_blocks || i.records_lost || i.truncated)
        FUZZ_CHECK(!i.clean);
      FUZZ_CHECK(i.clean == (i.status == gf::IntegrityStatus::kComplete));
    } else {
      FUZZ_CHECK(i.status != gf::IntegrityStatus::kComplete && i.clean == i.ended);
    }
    if (!i.clean) {
      FUZZ_CHECK(!i.detail.empty());
      ++not_clean;
    }
  }
  // The verdict over the report agrees with its traces.
  FUZZ_CHECK(report.integrity.not_clean == not_clean);
  FUZZ_CHECK(report.integrity.trusted == (not_clean == 0));
}

// Analyses and renders one input; false when it was rejected as an unusable trace.
bool run_one(const uint8_t* data, size_t size) {
  namespace fz = gpumemshim::fuzz;
  const uint8_t controls = fz::controls(data, size);
  std::string repaired;
  if ((controls & fz::kRepairChecksums) &&
      fz::control_offset(data, size) == gf::kHeaderSizeV3 - 1) {
    repaired.assign(reinterpret_cast<const char*>(data), size);
    fz::repair_checksums(reinterpret_cast<uint8_t*>(repaired.data()), size);
    data = reinterpret_cast<const uint8_t*>(repaired.data());
  }
  TraceFile& file = trace_file();
  file.write(data, size);
  const fz::Writer writer = fz::writer(controls);
  an::AnalyzeOptions options;
  options.jobs = 1;
  // As the CLI: `report --format json|html` makes timelines, `report` (text) and `check` do not.
  options.timelines = writer == fz::Writer::kJson || writer == fz::Writer::kHtml;
  an::Report report;
  try {
    report = an::analyze({file.path()}, options);
  } catch (const an::TraceError&) {
    return false;  // an unusable trace, said so
  } catch (const gf::TraceReadError&) {
    return false;
  }
  check_integrity(report);
  // The results are dropped: what is checked is that writing them is sound.
  an::report_text(report);
  an::leaks_text(report);
  an::FailPolicy policy;
  policy.leaks_over_limit = controls & fz::kLeaksOverLimit;
  if (controls & fz::kGrowthFails) policy.max_growth_bytes_per_step = 0;
  policy.allow_incomplete = controls & fz::kAllowIncomplete;
  switch (writer) {
    case fz::Writer::kJson:
      an::json_text(an::report_json(report));
      break;
    case fz::Writer::kSarif:
      an::json_text(an::report_sarif(report, policy));
      break;
    case fz::Writer::kHtml:
      an::report_html(report);
      break;
    case fz::Writer::kJunit:
      an::report_junit(report, policy);
      break;
  }
  return true;
}

}  // namespace

#ifndef GPUMEMSHIM_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)run_one(data, size);
  return 0;
}
#else
// Replays the given files (or every file of the given directories) GPUMEMSHIM_FUZZ_LOOPS times
// (default 1000), for the seeds' test and for profiling the per-input cost outside libFuzzer.
int main(int argc, char** argv) {
  std::vector<std::filesystem::path> paths;
  for (int i = 1; i < argc; ++i) {
    if (!std::filesystem::is_directory(argv[i])) {
      paths.emplace_back(argv[i]);
      continue;
    }
    for (const auto& entry : std::filesystem::directory_iterator(argv[i]))
      if (entry.is_regular_file()) paths.push_back(entry.path());
  }
  std::vector<std::string> inputs;
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    inputs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const char* loops_env = std::getenv("GPUMEMSHIM_FUZZ_LOOPS");
  const long loops = loops_env ? std::atol(loops_env) : 1000;
  size_t rejected = 0;
  const auto start = std::chrono::steady_clock::now();
  for (long l = 0; l < loops; ++l)
    for (const std::string& s : inputs)
      rejected += !run_one(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double runs = static_cast<double>(loops) * static_cast<double>(inputs.size());
  std::printf("%.0f runs in %.2f s: %.0f runs/s\n", runs, secs, runs / secs);
  if (rejected == 0)
    std::printf("all %zu inputs analysed\n", inputs.size());
  else
    std::printf("%zu of %.0f runs rejected as unusable traces\n", rejected, runs);
  return 0;
}
#endif

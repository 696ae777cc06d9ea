// Shared pieces of the gpumemshim CLI: options of each command and the error type.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace CLI {
class App;
}
namespace gpumemshim::analyzer {
struct Report;
}

namespace gpumemshim::cli {

// Exit codes, a contract that CI jobs rely on: 0 clean, 1 findings over the limits, 2 unusable
// input or usage.
inline constexpr int kExitClean = 0;
inline constexpr int kExitFindings = 1;
inline constexpr int kExitUsage = 2;

// Thrown for anything that ends the command: main prints "gpumemshim: error: <what>" and exits.
class CliError : public std::runtime_error {
 public:
  CliError(const std::string& message, int code = kExitUsage)
      : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// Writes text to FILE, or to stdout when path is empty or "-". Throws CliError naming the error of
// the call that failed (open, write, flush or close).
void write_output(const std::string& path, const std::string& text);
void print_error(const std::string& message);  // "gpumemshim: error: <message>" on stderr

struct RecordOptions {
  std::string output;  // GPUMEMSHIM_OUTPUT pattern; "" = shim default
  std::string stacks;  // GPUMEMSHIM_STACKS; "" = shim default
  std::vector<std::string> command;
};
int run_record(const RecordOptions& o);

// libgpumemshim.so: GPUMEMSHIM_LIBRARY, else the one installed or built beside this executable.
// locate_shim gives nullopt and says why (when `why` is given); find_shim throws CliError.
std::optional<std::string> locate_shim(std::string* why = nullptr);
std::string find_shim();

struct DoctorOptions {
  // The Python asked about torch, JAX and CuPy; "" = GPUMEMSHIM_PYTHON, else python3.
  std::string python;
};
int run_doctor(const DoctorOptions& o);

// The nearest command to a mistyped one ("reprot" -> "report"), or "" when none is near.
std::string nearest_command(const std::string& typed, const std::vector<std::string>& commands);

// Help text that fits 100 columns, options each on their own line. Call before adding commands.
void use_readable_help(CLI::App& app);

// The one error line for traces that are not clean, or "" when every trace is: what `check` and
// `diff` refuse without --allow-incomplete. `side` ("base", "new") prefixes each trace for diff.
std::string integrity_error(const analyzer::Report& report, const std::string& side = "");

struct ReportOptions {
  std::vector<std::string> traces;
  std::string format = "text";
  std::string output;
  std::string suppressions;
  size_t jobs = 0;     // --jobs N: traces analysed at once (0: one per core)
  bool quiet = false;  // --quiet: no progress line
};
int run_report(const ReportOptions& o);

struct CheckOptions {
  std::vector<std::string> traces;
  std::string suppressions;
  uint64_t max_leak_bytes = 0;
  std::string format = "text";
  std::string junit;  // --junit FILE: JUnit XML of the findings
  std::string sarif;  // --sarif FILE: SARIF 2.1.0 of the findings
  std::optional<uint64_t> max_growth_bytes_per_step;  // unset: growth is reported, never fails
  bool allow_incomplete = false;  // judge traces that are not clean by their findings (else exit 2)
};
int run_check(const CheckOptions& o);

struct DiffOptions {
  std::string base;
  std::string next;
  std::optional<double> fail_on_regression;  // --fail-on-regression PCT
  std::string format = "text";
  std::string output;
  bool allow_incomplete = false;  // compare traces that are not clean (else exit 2)
};
int run_diff(const DiffOptions& o);

struct StatsOptions {
  std::vector<std::string> traces;
};
int run_stats(const StatsOptions& o);

struct ExportOptions {
  std::vector<std::string> traces;
  std::string to;  // chrome | memory-viz
  std::string output;
};
int run_export(const ExportOptions& o);

}  // namespace gpumemshim::cli

// gpumemshim: record, report, check, diff, export, stats and doctor.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "cli.h"
#include "gpumemshim/analyzer/errors.h"
#include "numbers.h"

using namespace gpumemshim::cli;

namespace {

// `record [OPTIONS] [--] CMD ARGS...`: the command starts after the first `--`, or at the first
// argument that is neither an option of record nor an option's value. Returns argc for CLI11.
int split_record_command(int argc, char** argv, std::vector<std::string>& command) {
  if (argc < 2 || std::string_view(argv[1]) != "record") return argc;
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") {
      command.assign(argv + i + 1, argv + argc);
      return i;
    }
    if (a == "-o" || a == "--output" || a == "--stacks") {
      ++i;  // its value
      continue;
    }
    if (a.starts_with("-")) continue;  // -oX, --output=X, --help, or an unknown option for CLI11
    command.assign(argv + i, argv + argc);
    return i;
  }
  return argc;
}

// The numeric flags, given as text: CLI11 would read "-1" into an unsigned as a huge number and
// name neither the flag nor the value; numbers.h reads them strictly.
struct NumericArgs {
  std::string jobs, max_leak_bytes, max_growth, fail_on_regression;
  CLI::Option *jobs_opt = nullptr, *max_leak_opt = nullptr, *max_growth_opt = nullptr,
              *fail_opt = nullptr;

  void apply(ReportOptions& rep, CheckOptions& chk, DiffOptions& dif) const {
    if (jobs_opt && jobs_opt->count()) rep.jobs = parse_count("--jobs", jobs, "number of cores");
    if (max_leak_opt && max_leak_opt->count())
      chk.max_leak_bytes = parse_count("--max-leak-bytes", max_leak_bytes, "byte count");
    if (max_growth_opt && max_growth_opt->count())
      chk.max_growth_bytes_per_step =
          parse_count("--max-growth-bytes-per-step", max_growth, "byte count");
    if (fail_opt && fail_opt->count())
      dif.fail_on_regression = parse_percent("--fail-on-regression", fail_on_regression);
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpumemshim: find CUDA memory leaks, OOMs and growth from traces", "gpumemshim"};
  use_readable_help(app);  // before the commands: each takes the formatter it finds
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gpumemshim ") + GPUMEMSHIM_VERSION,
                       "print the version and exit");

  RecordOptions rec;
  auto* record = app.add_subcommand("record", "run a command with the shim preloaded");
  record
      ->add_option("-o,--output", rec.output,
                   "trace path pattern (%p pid, %h host, %r rank, %t time)")
      ->type_name("PATTERN");
  record->add_option("--stacks", rec.stacks, "native,python | python | native | none")
      ->type_name("KINDS")
      ->check(CLI::IsMember({"native,python", "python,native", "python", "native", "none"}));
  // Shown in the help only: the command is split off before parsing (see split_record_command).
  std::vector<std::string> command_help;
  record->add_option("command", command_help, "the command and its arguments (after --)")
      ->type_name("CMD");

  NumericArgs numbers;
  ReportOptions rep;
  auto* report = app.add_subcommand("report", "report leaks, failures and peaks of traces");
  report->add_option("traces", rep.traces, "trace files (one per process)")->required();
  report->add_option("--format", rep.format, "text, json or html (default: text)")
      ->type_name("FORMAT");
  report->add_option("-o,--output", rep.output, "write the report to FILE")->type_name("FILE");
  report->add_option("--suppressions", rep.suppressions, "LeakSanitizer-style suppressions file")
      ->type_name("FILE");
  numbers.jobs_opt =
      report
          ->add_option(
              "-j,--jobs", numbers.jobs,
              "cores to use (default: all this process may run on): traces analysed at once, "
              "and with cores to spare each trace's decompression and replay on threads of their "
              "own")
          ->type_name("N");
  report->add_flag("-q,--quiet", rep.quiet, "no progress line on stderr");

  CheckOptions chk;
  auto* check = app.add_subcommand("check", "exit 1 when the traces leak more than allowed");
  check->add_option("traces", chk.traces, "trace files (one per process)")->required();
  check->add_option("--suppressions", chk.suppressions, "LeakSanitizer-style suppressions file")
      ->type_name("FILE");
  numbers.max_leak_opt = check
                             ->add_option("--max-leak-bytes", numbers.max_leak_bytes,
                                          "leaked bytes allowed (default 0)")
                             ->type_name("BYTES");
  numbers.max_growth_opt = check
                               ->add_option("--max-growth-bytes-per-step", numbers.max_growth,
                                            "fail when a site grows by more than BYTES bytes per "
                                            "step (per allocation window without step markers; "
                                            "default: growth never fails)")
                               ->type_name("BYTES");
  check->add_flag(
      "--allow-incomplete", chk.allow_incomplete,
      "judge incomplete, damaged or write-failed traces by what they recorded (exit 0/1) "
      "instead of refusing them (exit 2)");
  check->add_option("--junit", chk.junit, "also write the findings as JUnit XML to FILE")
      ->type_name("FILE");
  check->add_option("--sarif", chk.sarif, "also write the findings as SARIF 2.1.0 to FILE")
      ->type_name("FILE");

  ExportOptions exp;
  auto* exporter =
      app.add_subcommand("export", "convert traces for other viewers (Perfetto, memory_viz)");
  exporter->add_option("traces", exp.traces, "trace files (memory-viz: one)")->required();
  exporter
      ->add_option("--to", exp.to,
                   "chrome (Chrome/Perfetto trace JSON) or memory-viz (PyTorch snapshot pickle)")
      ->type_name("FORMAT")
      ->required();
  exporter->add_option("-o,--output", exp.output, "write to FILE (default: stdout)")
      ->type_name("FILE");

  DiffOptions dif;
  auto* diff =
      app.add_subcommand("diff", "compare two runs: peak, leaks and the call sites that got worse");
  diff->add_option("base", dif.base, "trace of the base run")->required();
  diff->add_option("new", dif.next, "trace of the new run")->required();
  numbers.fail_opt = diff->add_option("--fail-on-regression", numbers.fail_on_regression,
                                      "exit 1 when peak or leaked bytes grew by more than PCT "
                                      "percent or a leak site appeared")
                         ->type_name("PCT");
  diff->add_flag(
      "--allow-incomplete", dif.allow_incomplete,
      "compare incomplete, damaged or write-failed traces instead of refusing them (exit 2)");
  diff->add_option("--format", dif.format, "text or json (default: text)")->type_name("FORMAT");
  diff->add_option("-o,--output", dif.output, "write the comparison to FILE")->type_name("FILE");

  StatsOptions sts;
  auto* stats = app.add_subcommand("stats", "record counts and sizes of traces");
  stats->add_option("traces", sts.traces, "trace files")->required();

  DoctorOptions doc;
  auto* doctor =
      app.add_subcommand("doctor", "what a recording would see here: CUDA, GPUs, Python, output");
  doctor
      ->add_option("--python", doc.python,
                   "the Python to ask about torch, JAX and CuPy (default: GPUMEMSHIM_PYTHON, "
                   "else python3 on PATH)")
      ->type_name("PATH");

  // A mistyped command gets the nearest one, not CLI11's "arguments were not expected".
  if (argc >= 2 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    std::string typed = argv[1];
    if (std::find(names.begin(), names.end(), typed) == names.end()) {
      std::string near = nearest_command(typed, names);
      std::string all;
      for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
      print_error(near.empty()
                      ? fmt::format("unknown command '{}' (commands: {})", typed, all)
                      : fmt::format("unknown command '{}'; did you mean '{}'?", typed, near));
      return kExitUsage;
    }
  }

  try {
    std::vector<std::string> command;
    int cli_argc = split_record_command(argc, argv, command);
    app.parse(cli_argc, argv);
    rec.command = std::move(command);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(e.what());
    return kExitUsage;
  }

  try {
    numbers.apply(rep, chk, dif);
    if (!*record) check_read_threads_env();
    if (*record) {
      return run_record(rec);
    }
    if (*report) return run_report(rep);
    if (*check) return run_check(chk);
    if (*diff) return run_diff(dif);
    if (*stats) return run_stats(sts);
    if (*exporter) return run_export(exp);
    if (*doctor) return run_doctor(doc);
  } catch (const CliError& e) {
    print_error(e.what());
    return e.code();
  } catch (const gpumemshim::analyzer::TraceError& e) {
    print_error(e.what());
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    print_error("out of memory");
    return kExitUsage;
  } catch (const std::exception& e) {
    print_error(e.what());
    return kExitUsage;
  }
  return kExitUsage;
}

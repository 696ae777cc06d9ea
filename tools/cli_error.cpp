#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "cli.h"
#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::cli {

void print_error(const std::string& message) {
  std::string line = message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';  // always one line
  fmt::print(stderr, "gpumemshim: error: {}\n", line);
}

namespace {

// Writes and closes f; 0, or the errno of the first call that failed. errno is read right after
// the call that failed: a later call (or an earlier, unrelated failure) must not name the error.
int write_and_close(std::FILE* f, const std::string& text, bool close) {
  int err = 0;
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) err = errno ? errno : EIO;
  errno = 0;
  if (std::fflush(f) != 0 && err == 0) err = errno ? errno : EIO;
  if (std::ferror(f) && err == 0) err = EIO;
  if (close) {
    errno = 0;
    if (std::fclose(f) != 0 && err == 0) err = errno ? errno : EIO;
  }
  return err;
}

}  // namespace

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    if (int err = write_and_close(stdout, text, false))
      throw CliError(fmt::format("<stdout>: cannot write: {}", std::strerror(err)));
    return;
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw CliError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  if (int err = write_and_close(f, text, true))
    throw CliError(fmt::format("{}: cannot write: {}", path, std::strerror(err)));
}

std::string integrity_error(const analyzer::Report& report, const std::string& side) {
  if (report.integrity.trusted) return {};
  std::string out;
  for (const std::string& problem : report.integrity.problems)
    out += (out.empty() ? "" : "; ") + (side.empty() ? "" : side + " trace ") + problem;
  for (const analyzer::ProcessReport& p : report.processes)
    if (!p.integrity.write_error_text.empty() &&
        p.integrity.detail.find(p.integrity.write_error_text) == std::string::npos)
      out += fmt::format(" ({}: the shim's write failed: {})", p.trace, p.integrity.write_error_text);
  return out;
}

}  // namespace gpumemshim::cli

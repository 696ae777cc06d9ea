#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "cli.h"

namespace gpumemshim::cli {

void print_error(const std::string& message) {
  std::string line = message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';  // always one line
  fmt::print(stderr, "gpumemshim: error: {}\n", line);
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
      throw CliError(fmt::format("<stdout>: cannot write: {}", std::strerror(errno)));
    return;
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw CliError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int err = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) throw CliError(fmt::format("{}: cannot write: {}", path, std::strerror(err ? err : errno)));
}

}  // namespace gpumemshim::cli

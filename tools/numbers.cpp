#include "numbers.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "cli.h"

namespace gpumemshim::cli {

namespace {

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// The value as the error shows it: printable ASCII only, and not too long for one line.
std::string shown(const std::string& text) {
  std::string out;
  for (unsigned char c : text.substr(0, 40))
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  if (text.size() > 40) out += "...";
  return out;
}

}  // namespace

uint64_t parse_count(const std::string& flag, const std::string& text, const char* what) {
  uint64_t v = 0;
  if (all_digits(text)) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc::result_out_of_range)
      throw CliError(fmt::format("{}: '{}' is too large for a {} (at most {})", flag, shown(text),
                                 what, UINT64_MAX));
    if (ec == std::errc() && end == text.data() + text.size()) return v;
  }
  throw CliError(fmt::format("{}: '{}' is not a {}", flag, shown(text), what));
}

double parse_percent(const std::string& flag, const std::string& text) {
  size_t dot = text.find('.');
  std::string whole = text.substr(0, dot),
              frac = dot == std::string::npos ? "" : text.substr(dot + 1);
  bool ok = (all_digits(whole) || (whole.empty() && !frac.empty())) &&
            (dot == std::string::npos || frac.empty() || all_digits(frac)) && text != ".";
  double v = 0;
  if (ok) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    ok = ec == std::errc() && end == text.data() + text.size() && std::isfinite(v) && v >= 0;
  }
  if (!ok)
    throw CliError(fmt::format("{}: '{}' is not a percentage (a number >= 0)", flag, shown(text)));
  return v;
}

void check_read_threads_env() {
  constexpr uint64_t kMost = 64;  // as the reader takes it (format/src/block_stream.cpp)
  const char* value = std::getenv("GPUMEMSHIM_READ_THREADS");
  if (!value || !*value) return;
  if (parse_count("GPUMEMSHIM_READ_THREADS", value, "thread count") > kMost)
    throw CliError(
        fmt::format("GPUMEMSHIM_READ_THREADS: '{}' is more than {} threads", shown(value), kMost));
}

}  // namespace gpumemshim::cli

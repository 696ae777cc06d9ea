#include "gpumemshim/analyzer/suppressions.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace gpumemshim::analyzer {

// A port of sanitizer_common's TemplateMatch (sanitizer_common.cpp).
bool template_match(std::string_view templ, std::string_view str) {
  if (str.empty()) return false;
  bool start = false;
  if (!templ.empty() && templ[0] == '^') {
    start = true;
    templ.remove_prefix(1);
  }
  bool asterisk = false;
  while (!templ.empty()) {
    if (templ[0] == '*') {
      templ.remove_prefix(1);
      start = false;
      asterisk = true;
      continue;
    }
    if (templ[0] == '$') return str.empty() || asterisk;
    if (str.empty()) return false;
    // The literal piece up to the next '*' or '$'.
    size_t end = templ.find_first_of("*$");
    std::string_view piece = templ.substr(0, end);
    size_t spos = str.find(piece);
    if (spos == std::string_view::npos) return false;
    if (start && spos != 0) return false;
    str.remove_prefix(spos + piece.size());
    templ.remove_prefix(end == std::string_view::npos ? templ.size() : end);
    start = false;
    asterisk = false;
  }
  return true;
}

namespace {

// A line as an error shows it: printable characters only, cut to a length that fits one line.
std::string shown(std::string_view line) {
  constexpr size_t kMax = 80;
  std::string out;
  for (char c : line.substr(0, kMax)) out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  if (line.size() > kMax) out += "...";
  return out;
}

// The offset of the first byte that is not text (a NUL or invalid UTF-8), or npos.
size_t first_binary_byte(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) return i;
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) return i;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return i;
    if ((len == 2 && c < 0xc2) || (len == 4 && c > 0xf4)) return i;  // overlong, beyond U+10FFFF
    i += len;
  }
  return std::string_view::npos;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}
}  // namespace

Suppressions Suppressions::parse(std::string_view text, const std::string& file_name) {
  Suppressions out;
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos)
      throw std::invalid_argument(fmt::format("{}:{}: not a suppression rule: '{}' (expected KIND:PATTERN)",
                                              file_name, line_no, shown(line)));
    std::string_view type = trim(line.substr(0, colon));
    std::string_view pattern = trim(line.substr(colon + 1));
    if (type != "leak" && type != "growth" && type != "retained" && type != "fragmentation")
      throw std::invalid_argument(fmt::format(
          "{}:{}: not a suppression rule: '{}' (unknown kind '{}': expected leak, growth, retained or "
          "fragmentation)",
          file_name, line_no, shown(line), shown(type)));
    if (pattern.empty())
      throw std::invalid_argument(
          fmt::format("{}:{}: not a suppression rule: '{}' (empty pattern)", file_name, line_no, shown(line)));
    out.entries_.push_back(Suppression{std::string(type), std::string(pattern),
                                       fmt::format("{}:{}", file_name, line_no), 0, 0});
  }
  return out;
}

// Only a regular file of text: a directory reads as an empty file, a device or a FIFO may never
// end, and a binary file (a trace given by mistake) would be echoed into the error.
Suppressions Suppressions::load(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw std::invalid_argument(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw std::invalid_argument(fmt::format("{}: is a directory, not a suppressions file", path));
  if (!S_ISREG(st.st_mode))
    throw std::invalid_argument(fmt::format("{}: not a regular file (a device, FIFO or socket)", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw std::invalid_argument(fmt::format("{}: cannot read", path));
  std::string text = ss.str();
  if (size_t at = first_binary_byte(text); at != std::string::npos)
    throw std::invalid_argument(
        fmt::format("{}: not a text file (a NUL byte or invalid UTF-8 at byte {})", path, at));
  return parse(text, path);
}

int Suppressions::match(std::string_view type, const std::vector<Frame>& stack) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].type != type) continue;
    const std::string& p = entries_[i].pattern;
    for (const Frame& f : stack) {
      if (template_match(p, f.function) || template_match(p, f.file) || template_match(p, f.module))
        return static_cast<int>(i);
    }
  }
  return -1;
}

void Suppressions::record_hit(int index, uint64_t bytes) {
  if (index < 0 || static_cast<size_t>(index) >= entries_.size()) return;
  ++entries_[static_cast<size_t>(index)].hit_count;
  entries_[static_cast<size_t>(index)].hit_bytes += bytes;
}

}  // namespace gpumemshim::analyzer

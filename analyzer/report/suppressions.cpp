#include "gpumemshim/analyzer/suppressions.h"

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
      throw std::invalid_argument(fmt::format("{}:{}: bad suppression line '{}' (expected KIND:PATTERN)",
                                              file_name, line_no, line));
    std::string_view type = trim(line.substr(0, colon));
    std::string_view pattern = trim(line.substr(colon + 1));
    if (type != "leak" && type != "growth" && type != "retained" && type != "fragmentation")
      throw std::invalid_argument(fmt::format(
          "{}:{}: unknown suppression type '{}' (expected leak, growth, retained or fragmentation)",
          file_name, line_no, type));
    if (pattern.empty())
      throw std::invalid_argument(fmt::format("{}:{}: empty suppression pattern", file_name, line_no));
    out.entries_.push_back(Suppression{std::string(type), std::string(pattern),
                                       fmt::format("{}:{}", file_name, line_no), 0, 0});
  }
  return out;
}

Suppressions Suppressions::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw std::invalid_argument(fmt::format("{}: cannot read", path));
  return parse(ss.str(), path);
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

// LeakSanitizer-style suppressions: `KIND:PATTERN` lines (KIND: leak, growth, retained,
// fragmentation — the finding kind it silences), `#` comments, blank lines. A pattern
// matches a leak when it matches the function, file or module of any frame of its stack, with
// LSan's TemplateMatch semantics (`*` wildcard, substring match unless anchored by ^ / $).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

// LSan's TemplateMatch. An empty str never matches.
bool template_match(std::string_view templ, std::string_view str);

class Suppressions {
 public:
  // Throws std::invalid_argument("<file>:<line>: <reason>") on a bad line.
  static Suppressions parse(std::string_view text, const std::string& file_name);
  // Throws std::invalid_argument("<file>: <reason>") too: unreadable, not a regular file, or not
  // text (a NUL byte or invalid UTF-8).
  static Suppressions load(const std::string& path);

  // The index of the first matching leak suppression, or -1.
  int match(const std::vector<Frame>& stack) const { return match("leak", stack); }
  // The index of the first matching suppression of that kind, or -1.
  int match(std::string_view type, const std::vector<Frame>& stack) const;
  void record_hit(int index, uint64_t bytes);
  const std::vector<Suppression>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<Suppression> entries_;
};

}  // namespace gpumemshim::analyzer

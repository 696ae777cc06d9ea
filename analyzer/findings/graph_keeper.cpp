#include "findings/graph_keeper.h"

#include <cctype>
#include <fstream>
#include <string_view>
#include <vector>

namespace gpumemshim::analyzer {

namespace {

// How far below the making line a keeper is looked for: a loop body's length.
constexpr uint32_t kMaxLinesAfter = 60;
constexpr size_t kMaxLineBytes = 4096;

bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

std::string_view trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The line without its comment (a '#' outside quotes).
std::string_view code_of(std::string_view s) {
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (quote) {
      if (s[i] == '\\')
        ++i;
      else if (s[i] == quote)
        quote = 0;
    } else if (s[i] == '"' || s[i] == '\'') {
      quote = s[i];
    } else if (s[i] == '#') {
      return s.substr(0, i);
    }
  }
  return s;
}

size_t indent_of(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && (s[n] == ' ' || s[n] == '\t')) ++n;
  return n;
}

// The '=' of an assignment (not ==, <=, >=, !=, nor a keyword argument inside brackets); npos
// when the line assigns nothing. `augmented` tells `+=`.
size_t assignment(std::string_view code, bool* augmented = nullptr) {
  int depth = 0;
  for (size_t i = 0; i < code.size(); ++i) {
    const char c = code[i];
    if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if (c == ')' || c == ']' || c == '}')
      --depth;
    else if (c == '=' && depth == 0) {
      if (i + 1 < code.size() && code[i + 1] == '=') return std::string_view::npos;
      const char before = i ? code[i - 1] : ' ';
      if (before == '=' || before == '<' || before == '>' || before == '!')
        return std::string_view::npos;
      if (augmented) *augmented = before == '+';
      return before == '+' ? i - 1 : i;
    }
  }
  return std::string_view::npos;
}

// Where `name` stands in `code` as a whole value: not part of a longer name, not an attribute
// of something else, not followed by an attribute or call (loss.item(), loss.detach()).
bool uses_whole(std::string_view code, std::string_view name) {
  for (size_t at = code.find(name); at != std::string_view::npos; at = code.find(name, at + 1)) {
    const size_t end = at + name.size();
    if (at > 0 && (ident_char(code[at - 1]) || code[at - 1] == '.')) continue;
    if (end < code.size() &&
        (ident_char(code[end]) || code[end] == '.' || code[end] == '(' || code[end] == '['))
      continue;
    return true;
  }
  return false;
}

// The plain names a line assigns: `loss = ...`, `a, b = ...` (subscripts and attributes are not
// names the following lines can keep).
std::vector<std::string> assigned_names(std::string_view code) {
  std::vector<std::string> names;
  const size_t eq = assignment(code);
  if (eq == std::string_view::npos) return names;
  std::string_view lhs = code.substr(0, eq);
  while (!lhs.empty()) {
    const size_t comma = lhs.find(',');
    std::string_view part = trim(lhs.substr(0, comma));
    bool plain = !part.empty() && !std::isdigit(static_cast<unsigned char>(part.front()));
    for (char c : part) plain = plain && ident_char(c);
    if (plain) names.emplace_back(part);
    if (comma == std::string_view::npos) break;
    lhs.remove_prefix(comma + 1);
  }
  return names;
}

// How `code` keeps `name` (empty: it does not): appended to a list, stored under a key or index,
// summed into a running total.
std::string keeps(std::string_view code, std::string_view name) {
  for (std::string_view call : {".append(", ".extend(", ".insert(", ".add("}) {
    const size_t at = code.find(call);
    if (at != std::string_view::npos && uses_whole(code.substr(at + call.size()), name))
      return "appends it to a list";
  }
  bool augmented = false;
  const size_t eq = assignment(code, &augmented);
  if (eq == std::string_view::npos) return {};
  const std::string_view lhs = trim(code.substr(0, eq));
  const std::string_view rhs = code.substr(eq + (augmented ? 2 : 1));
  if (!uses_whole(rhs, name)) return {};
  if (augmented) return "sums it across steps";
  if (lhs.find('[') != std::string_view::npos) return "stores it in a dict or list";
  // `total = total + loss`: the target is also summed on the right.
  if (uses_whole(rhs, lhs) && rhs.find('+') != std::string_view::npos)
    return "sums it across steps";
  return {};
}

}  // namespace

std::optional<GraphKeeper> find_graph_keeper(const std::string& file, uint32_t line) {
  if (file.empty() || line == 0 || file.front() == '<') return std::nullopt;
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::string text;
  uint32_t n = 0;
  while (n + 1 < line && std::getline(in, text)) ++n;
  if (!std::getline(in, text) || text.size() > kMaxLineBytes) return std::nullopt;
  const std::string made = text;
  const std::string_view made_code = code_of(made);
  // The making line keeps it itself: `outputs[step] = model(x)`, `losses.append(loss_fn(...))`.
  bool augmented = false;
  const size_t eq = assignment(made_code, &augmented);
  if (made_code.find(".append(") != std::string_view::npos)
    return GraphKeeper{line, std::string(trim(made)), "appends it to a list"};
  if (eq != std::string_view::npos && augmented)
    return GraphKeeper{line, std::string(trim(made)), "sums it across steps"};
  if (eq != std::string_view::npos &&
      trim(made_code.substr(0, eq)).find('[') != std::string_view::npos)
    return GraphKeeper{line, std::string(trim(made)), "stores it in a dict or list"};
  const std::vector<std::string> names = assigned_names(made_code);
  if (names.empty()) return std::nullopt;
  const size_t block = indent_of(made);
  for (uint32_t k = 1; k <= kMaxLinesAfter && std::getline(in, text); ++k) {
    if (text.size() > kMaxLineBytes) return std::nullopt;
    const std::string_view code = code_of(text);
    if (trim(code).empty()) continue;
    if (indent_of(text) < block) break;  // the block (the loop's body) ended
    for (const std::string& name : names) {
      std::string how = keeps(code, name);
      if (!how.empty()) return GraphKeeper{line + k, std::string(trim(text)), std::move(how)};
    }
  }
  return std::nullopt;
}

}  // namespace gpumemshim::analyzer

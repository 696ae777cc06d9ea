// The help text of every command: options each on their own line, descriptions wrapped to fit
// 100 columns, and no value lists run into the option names (IsMember's "TEXT:{a,b,c}").
#include <CLI/CLI.hpp>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"

namespace gpumemshim::cli {

namespace {

constexpr size_t kNameColumn = 30;
constexpr size_t kWidth = 100;

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// "  name    description", the description wrapped at kWidth and indented to kNameColumn; a name
// too long for its column gets the description on the lines below.
std::string two_columns(const std::string& name, const std::string& description) {
  std::string out = "  " + name;
  size_t col = out.size();
  if (col >= kNameColumn) {
    out += '\n';
    col = 0;
  }
  bool line_empty = true;
  for (const std::string& w : words(description)) {
    if (!line_empty && col + 1 + w.size() > kWidth) {
      out += '\n';
      col = 0;
      line_empty = true;
    }
    if (col < kNameColumn) {
      out.append(kNameColumn - col, ' ');
      col = kNameColumn;
    } else if (!line_empty) {
      out += ' ';
      ++col;
    }
    out += w;
    col += w.size();
    line_empty = false;
  }
  return out + '\n';
}

class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option(const CLI::Option* opt, bool is_positional) const override {
    return two_columns(make_option_name(opt, is_positional) + make_option_opts(opt),
                       make_option_desc(opt));
  }

  std::string make_subcommand(const CLI::App* sub) const override {
    return two_columns(sub->get_display_name(), sub->get_description());
  }

  // The value's name only: the description says which values there are.
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string text = CLI::Formatter::make_option_opts(opt);
    if (auto brace = text.find(":{"); brace != std::string::npos) {
      auto end = text.find('}', brace);
      if (end != std::string::npos) text.erase(brace, end + 1 - brace);
    }
    return text;
  }
};

}  // namespace

void use_readable_help(CLI::App& app) {
  app.formatter(std::make_shared<HelpFormatter>());
}

}  // namespace gpumemshim::cli

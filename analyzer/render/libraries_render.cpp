#include "render/libraries_render.h"

#include <fmt/format.h>

#include <algorithm>

#include "gpumemshim/analyzer/units.h"
#include "render/escape.h"

namespace gpumemshim::analyzer {

namespace {

std::string peak_text(const LibraryMemory& r) {
  return r.peak_bytes ? human_bytes(*r.peak_bytes) : "?";
}

}  // namespace

std::string libraries_text(const std::vector<LibraryMemory>& rows) {
  if (rows.empty()) return {};
  size_t width = 7;  // "library"
  for (const LibraryMemory& r : rows) width = std::max(width, r.name.size());
  std::string out =
      fmt::format("   device memory by library:\n     {:<{}}  {:>11}  {:>11}  {:>11}  {:>5}  {}\n",
                  "library", width, "at peak", "own peak", "at end", "sites", "largest site");
  for (const LibraryMemory& r : rows)
    out += fmt::format("     {:<{}}  {:>11}  {:>11}  {:>11}  {:>5}  {}\n", r.name, width,
                       human_bytes(r.at_peak_bytes), peak_text(r), human_bytes(r.end_bytes),
                       r.sites, r.top_site);
  return out;
}

nlohmann::json libraries_json(const std::vector<LibraryMemory>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const LibraryMemory& r : rows)
    a.push_back({{"name", r.name},
                 {"module", r.module.empty() ? nlohmann::json() : nlohmann::json(r.module)},
                 {"role", r.role},
                 {"peak_bytes", r.peak_bytes ? nlohmann::json(*r.peak_bytes) : nlohmann::json()},
                 {"at_peak_bytes", r.at_peak_bytes},
                 {"end_bytes", r.end_bytes},
                 {"sites", r.sites},
                 {"top_site", r.top_site}});
  return a;
}

std::string libraries_html(const std::vector<LibraryMemory>& rows) {
  if (rows.empty()) return {};
  auto cell = [](uint64_t b) {
    return fmt::format("<td class=\"num\" title=\"{} bytes\">{}</td>", b,
                       html_escape(human_bytes(b)));
  };
  std::string out =
      "<h3>Device memory by library</h3>\n<table><tr><th>library</th><th>module</th><th>role</th>"
      "<th>at peak</th><th>own peak</th><th>at end</th><th>sites</th><th>largest site</th></tr>\n";
  for (const LibraryMemory& r : rows)
    out += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td>{}{}{}<td class=\"num\">{}</td><td>{}</td></tr>\n",
        html_escape(r.name), html_escape(r.module), html_escape(r.role), cell(r.at_peak_bytes),
        r.peak_bytes ? cell(*r.peak_bytes) : std::string("<td class=\"num\">?</td>"),
        cell(r.end_bytes), r.sites, html_escape(r.top_site));
  return out + "</table>\n";
}

}  // namespace gpumemshim::analyzer

#include "render/frameworks_render.h"

#include <fmt/format.h>

#include "render/escape.h"

namespace gpumemshim::analyzer {

std::string frameworks_text(const std::vector<FrameworkMode>& modes) {
  std::string out;
  for (const FrameworkMode& m : modes) {
    out += fmt::format("   {} allocator: {} (seen from the {})\n     shows: {}\n", m.framework,
                       m.mode, m.seen_from, m.shows);
    if (!m.cannot_show.empty()) out += fmt::format("     cannot show: {}\n", m.cannot_show);
  }
  return out;
}

nlohmann::json frameworks_json(const std::vector<FrameworkMode>& modes) {
  nlohmann::json a = nlohmann::json::array();
  for (const FrameworkMode& m : modes)
    a.push_back({{"framework", m.framework},
                 {"mode", m.mode},
                 {"seen_from", m.seen_from},
                 {"shows", m.shows},
                 {"cannot_show",
                  m.cannot_show.empty() ? nlohmann::json() : nlohmann::json(m.cannot_show)}});
  return a;
}

std::string frameworks_html(const std::vector<FrameworkMode>& modes) {
  std::string out;
  for (const FrameworkMode& m : modes) {
    out += fmt::format(
        "<p><b>{} allocator</b>: {} <span class=\"muted\">(seen from the {})</span><br>"
        "shows: {}",
        html_escape(m.framework), html_escape(m.mode), html_escape(m.seen_from),
        html_escape(m.shows));
    if (!m.cannot_show.empty())
      out += fmt::format("<br>cannot show: {}", html_escape(m.cannot_show));
    out += "</p>\n";
  }
  return out;
}

}  // namespace gpumemshim::analyzer

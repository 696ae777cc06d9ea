// The self-contained HTML report: one file, inline CSS and SVG, nothing fetched. Written from the
// JSON report (docs/report-json.md) with processes[i].timeline added (add_timelines), so every
// section the JSON has (growth, fragmentation, recommendations, ranks) shows up when present.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gpumemshim::analyzer {

std::string report_html(const nlohmann::json& report);

// Text made safe for HTML element content and quoted attribute values.
std::string html_escape(std::string_view text);

}  // namespace gpumemshim::analyzer

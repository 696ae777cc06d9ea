// Each framework's allocator mode (report.h, FrameworkMode) as the text, JSON and HTML reports say
// it.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

std::string frameworks_text(const std::vector<FrameworkMode>& modes);
// processes[].frameworks (docs/report-json.md).
nlohmann::json frameworks_json(const std::vector<FrameworkMode>& modes);
std::string frameworks_html(const std::vector<FrameworkMode>& modes);

}  // namespace gpumemshim::analyzer

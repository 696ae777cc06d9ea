// Report writers.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "gpumemshim/analyzer/analysis.h"

namespace gpumemshim::analyzer {

inline constexpr const char* kReportSchema = "gpumemshim-report/1";

nlohmann::json report_json(const Report& report);
std::string report_text(const Report& report);
// Only the unsuppressed leaks (and the suppression summary): what `check` prints on failure.
std::string leaks_text(const Report& report);
std::string stats_text(const std::vector<LoadedTrace>& traces);

// "1.50 MiB"
std::string human_bytes(uint64_t bytes);

}  // namespace gpumemshim::analyzer

// `check --sarif FILE`: the report's findings as SARIF 2.1.0 (GitHub code scanning and other
// static-analysis viewers): one result per finding, located at its innermost user frame, the whole
// stack as a code flow.
#pragma once
#include <nlohmann/json.hpp>

#include "render/ci_findings.h"

namespace gpumemshim::analyzer {

inline constexpr const char* kSarifSchema = "https://json.schemastore.org/sarif-2.1.0.json";

nlohmann::json report_sarif(const nlohmann::json& report, const FailPolicy& policy);

// A file path as a SARIF artifact URI: absolute paths become file:// URIs, relative ones stay
// relative (percent-encoded either way).
std::string file_uri(const std::string& path);

}  // namespace gpumemshim::analyzer

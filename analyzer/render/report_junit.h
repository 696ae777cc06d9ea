// `check --junit FILE`: the report's findings as JUnit XML (the Surefire/Jenkins dialect CI
// servers read): one testcase per finding, failing where the finding fails `check`, and one
// passing testcase when nothing fails.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "render/ci_findings.h"

namespace gpumemshim::analyzer {

std::string report_junit(const nlohmann::json& report, const FailPolicy& policy);

// Text made safe for XML 1.0: an attribute value (newlines kept as &#10;) or character data.
std::string xml_escape(const std::string& text);
std::string xml_escape(const std::string& text, bool attribute);

}  // namespace gpumemshim::analyzer

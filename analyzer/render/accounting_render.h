// The accounting points (report.h, AccountingPoint) as the text, JSON and HTML reports show them:
// the device's view = traced + not explained, with the likely owners of the rest.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

// One line per point, indented as the process block's lines; nothing without points.
std::string accounting_text(const std::vector<AccountingPoint>& points);
// processes[].accounting (docs/report-json.md).
nlohmann::json accounting_json(const std::vector<AccountingPoint>& points);
// A table for the process's section; nothing without points.
std::string accounting_html(const std::vector<AccountingPoint>& points);

}  // namespace gpumemshim::analyzer

// Device memory by library (report.h, LibraryMemory) as the text, JSON and HTML reports show it.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

// A table indented as the process block's lines; nothing without rows.
std::string libraries_text(const std::vector<LibraryMemory>& rows);
// processes[].libraries (docs/report-json.md).
nlohmann::json libraries_json(const std::vector<LibraryMemory>& rows);
// A table for the process's section; nothing without rows.
std::string libraries_html(const std::vector<LibraryMemory>& rows);

}  // namespace gpumemshim::analyzer

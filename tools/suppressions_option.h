// --suppressions FILE of `report` and `check`.
#pragma once
#include <string>

#include "gpumemshim/analyzer/analyze.h"

namespace gpumemshim::cli {

// Loads FILE (none when path is empty) into `storage` and points options at it. Throws CliError
// for a file that cannot be read or has a bad line.
void use_suppressions(const std::string& path, analyzer::Suppressions& storage,
                      analyzer::AnalyzeOptions& options);

}  // namespace gpumemshim::cli

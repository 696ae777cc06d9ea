#include "suppressions_option.h"

#include <stdexcept>

#include "cli.h"

namespace gpumemshim::cli {

void use_suppressions(const std::string& path, analyzer::Suppressions& storage,
                      analyzer::AnalyzeOptions& options) {
  if (path.empty()) return;
  try {
    storage = analyzer::Suppressions::load(path);
  } catch (const std::invalid_argument& e) {
    throw CliError(e.what());
  }
  options.suppressions = &storage;
}

}  // namespace gpumemshim::cli

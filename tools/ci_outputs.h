// CI outputs of `check` (JUnit, SARIF). Throws CliError (exit 2) when a file cannot be written.
#pragma once
#include "cli.h"
#include "gpumemshim/analyzer/render.h"
#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::cli {

void write_ci_outputs(const CheckOptions& o, const analyzer::Report& report,
                      const analyzer::FailPolicy& policy);

}  // namespace gpumemshim::cli

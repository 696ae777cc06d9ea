// CI outputs of `check` (JUnit, SARIF). Throws CliError (exit 2) when a file cannot be written.
#pragma once
#include "cli.h"
#include "gpumemshim/analyzer/analysis.h"
#include "render/ci_findings.h"

namespace gpumemshim::cli {

void write_ci_outputs(const CheckOptions& o, const analyzer::Report& report,
                      const analyzer::FailPolicy& policy);

}  // namespace gpumemshim::cli

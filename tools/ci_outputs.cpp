// `check --junit FILE --sarif FILE`: the findings for CI servers, written from the same Report
// as `report`, so that they say exactly what it says.
#include "ci_outputs.h"

namespace gpumemshim::cli {

namespace an = gpumemshim::analyzer;

void write_ci_outputs(const CheckOptions& o, const an::Report& report, const an::FailPolicy& policy) {
  if (o.junit.empty() && o.sarif.empty()) return;
  if (!o.junit.empty()) write_output(o.junit, an::report_junit(report, policy));
  if (!o.sarif.empty()) write_output(o.sarif, an::json_text(an::report_sarif(report, policy)));
}

}  // namespace gpumemshim::cli

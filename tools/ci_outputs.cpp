// `check --junit FILE --sarif FILE`: the findings for CI servers, written from the JSON report so
// that they say exactly what `report --format json` says.
#include "ci_outputs.h"

#include "gpumemshim/analyzer/report.h"
#include "render/report_junit.h"
#include "render/report_sarif.h"

namespace gpumemshim::cli {

namespace an = gpumemshim::analyzer;

void write_ci_outputs(const CheckOptions& o, const an::Report& report, const an::FailPolicy& policy) {
  if (o.junit.empty() && o.sarif.empty()) return;
  nlohmann::json json = an::report_json(report);
  if (!o.junit.empty()) write_output(o.junit, an::report_junit(json, policy));
  if (!o.sarif.empty()) write_output(o.sarif, an::report_sarif(json, policy).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace gpumemshim::cli

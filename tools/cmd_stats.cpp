#include "cli.h"
#include "replay/load.h"
#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::cli {

namespace an = gpumemshim::analyzer;

int run_stats(const StatsOptions& o) {
  std::vector<an::LoadedTrace> traces;
  for (const std::string& path : o.traces) traces.push_back(an::load_trace(path));
  write_output("", an::stats_text(traces));
  return kExitClean;
}

}  // namespace gpumemshim::cli

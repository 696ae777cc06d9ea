#include "cli.h"
#include "gpumemshim/analyzer/render.h"

namespace gpumemshim::cli {

namespace an = gpumemshim::analyzer;

int run_stats(const StatsOptions& o) {
  write_output("", an::stats_text(o.traces));
  return kExitClean;
}

}  // namespace gpumemshim::cli

// `gpumemshim export TRACE... --to chrome|memory-viz -o FILE`: the trace in formats other viewers
// open (ui.perfetto.dev / chrome://tracing; pytorch.org/memory_viz).
#include "cli.h"
#include "gpumemshim/analyzer/render.h"

namespace gpumemshim::cli {

namespace an = gpumemshim::analyzer;

int run_export(const ExportOptions& o) {
  if (o.to == "chrome") {
    write_output(o.output, an::json_text(an::chrome_trace(o.traces), -1));
    return kExitClean;
  }
  if (o.to == "memory-viz") {
    if (o.traces.size() != 1)
      throw CliError("--to memory-viz takes one trace (a snapshot is one process)");
    write_output(o.output, an::to_pickle(an::memviz_snapshot(o.traces[0])));
    return kExitClean;
  }
  throw CliError("--to must be chrome or memory-viz, not '" + o.to + "'");
}

}  // namespace gpumemshim::cli

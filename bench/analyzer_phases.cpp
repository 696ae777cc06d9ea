// Where the analyzer's time goes on one trace, each phase timed on its own as `report --format
// json` runs them: load (read + time-ordered replay), analysis, timeline and its JSON, the report's
// JSON and its text, so a throughput change can be traced to its phase. First, the trace reader on
// its own (reading, ordering and decoding into a sink that drops every record): the load's share
// that is not the replay.
//
//   analyzer_phases TRACE [--replay-thread]   (the replay on a second thread, as analyze() does
//                                              for one trace when a core is free)
#include <chrono>
#include <cstdio>
#include <string_view>

#include "gpumemshim/format/trace_reader.h"
#include "report/analysis.h"
#include "replay/load.h"
#include "gpumemshim/analyzer/render.h"
#include "render/json_parts.h"
#include "report/stack_view.h"
#include "findings/timeline.h"

namespace an = gpumemshim::analyzer;

int main(int argc, char** argv) {
  const bool replay_thread = argc == 3 && std::string_view(argv[2]) == "--replay-thread";
  if (argc != 2 && !replay_thread) {
    std::fprintf(stderr, "usage: analyzer_phases TRACE [--replay-thread]\n");
    return 2;
  }
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  auto lap = [&](const char* phase) {
    auto now = clock::now();
    std::printf("%-10s %8.3f s\n", phase, std::chrono::duration<double>(now - t0).count());
    t0 = now;
  };
  {
    struct Drop final : gpumemshim::format::TraceSink {};
    Drop drop;
    gpumemshim::format::TraceReader(argv[1]).read(drop);
  }
  lap("read");
  an::LoadedTrace trace = an::load_trace(argv[1], {}, replay_thread);
  lap("load");
  an::AnalyzeOptions options;
  an::StackView stacks(trace, options.max_frames);
  an::ProcessReport p = an::analyze_trace(trace, options, nullptr, &stacks);
  lap("analyze");
  an::Timeline tl =
      an::build_timeline(trace, an::kMaxTimelineSamples, an::kTimelineTopSites, &stacks);
  lap("timeline");
  auto j = an::timeline_json(tl);
  lap("json");
  an::Report report;
  report.processes.push_back(std::move(p));
  auto rj = an::report_json(report);
  lap("report");
  std::string text = rj.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  lap("dump");
  std::printf("events %llu, sites %zu, samples %zu\n",
              static_cast<unsigned long long>(trace.stats.records), tl.all_sites.size(), tl.samples.size());
  return 0;
}

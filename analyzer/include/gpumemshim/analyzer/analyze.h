// The top of the analyzer: several traces (one per process) -> one typed Report (report.h).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "gpumemshim/analyzer/report.h"
#include "gpumemshim/analyzer/suppressions.h"

namespace gpumemshim::analyzer {

struct AnalyzeOptions {
  const Suppressions* suppressions = nullptr;
  size_t max_frames = 32;
  // Cores to use; 0: those this process may run on. Traces are analysed at once up to that; with
  // cores to spare, each one gets read and replay threads (load.h).
  size_t jobs = 0;
  bool progress = false;  // a progress line on stderr (when it is a terminal, after ~2 s)
  // Each process's memory over time (ProcessReport::timeline), made from the trace the analysis
  // loaded and its symbolized stacks, not from a second load.
  bool timelines = false;
};

// Throws TraceError for an unusable trace. processes are the distinct traces of paths, in their
// order: a path given twice, a link to another one or a copy of the same recording is analysed
// once and listed in Report::duplicates.
Report analyze(const std::vector<std::string>& paths, const AnalyzeOptions& options = {});

}  // namespace gpumemshim::analyzer

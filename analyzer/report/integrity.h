// Whether a report can be trusted: each trace's integrity as the reader found it, the verdict over
// all traces, and traces given twice (analysed once).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

// For each path, the index of the first path that names the same file (the same device and
// inode: a path given twice, a hard or a soft link), or its own index. A path that cannot be
// stat'ed is its own (reading it reports why).
std::vector<size_t> first_same_file(const std::vector<std::string>& paths);

// Two traces of one process run: the same host, pid and start time (Process records in both).
bool same_recording(const ProcessInfo& a, const ProcessInfo& b);

// Keeps the first of each recording given more than once (a copy of a trace), listing the others
// in report.duplicates.
void drop_same_recordings(Report& report, std::vector<size_t>& kept_inputs);

// The verdict over report.processes.
Verdict verdict_of(const std::vector<ProcessReport>& processes);

// The note every report shows, with its integrity, when events came after a later flush mark
// (stats.late_events: replayed where they were read, so a pair near one may be matched out of
// order); empty when none did.
std::string late_events_note(const TraceStats& stats);

// True when the process recorded no memory event at all.
bool has_no_memory_events(const ProcessReport& p);

}  // namespace gpumemshim::analyzer

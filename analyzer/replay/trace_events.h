// The timed records of one trace (allocs, frees, failures, meminfo samples, markers, torch events)
// in time order, for the viewers (timeline, HTML, exports) that need the whole history rather than
// the end state a LoadedTrace keeps.
#pragma once
#include <string>
#include <variant>
#include <vector>

#include "gpumemshim/format/decoder.h"
#include "gpumemshim/format/records.h"

namespace gpumemshim::analyzer {

using TimedEvent = std::variant<format::AllocRecord, format::FreeRecord, format::AllocFailedRecord,
                                format::MemInfoRecord, format::MarkerRecord, format::TorchEventRecord>;

uint64_t event_time_ns(const TimedEvent& e);

struct TraceEvents {
  format::MappedFile file;  // marker names point into it
  std::vector<TimedEvent> events;  // stably sorted by time (file order within a thread)
};

// Reads the trace again (it was loaded before, so it is known to be usable): a truncated tail is
// ignored like load_trace does. Throws TraceError for anything else.
TraceEvents read_trace_events(const std::string& path);

}  // namespace gpumemshim::analyzer

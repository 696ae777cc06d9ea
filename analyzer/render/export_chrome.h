// Chrome / Perfetto trace-event JSON ({"traceEvents": [...]}, timestamps in µs): counter tracks for
// live device bytes (total, per top site, PyTorch reserved/allocated), instant events for marks,
// steps, failed allocations and OOMs, B/E slices for ranges. Open in ui.perfetto.dev or
// chrome://tracing.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpumemshim::analyzer {

// Several traces are aligned on their wall-clock start. Throws TraceError.
nlohmann::json chrome_trace(const std::vector<std::string>& paths);

}  // namespace gpumemshim::analyzer

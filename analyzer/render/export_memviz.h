// PyTorch's memory snapshot format (torch.cuda.memory._snapshot(), pickled), so the trace opens in
// https://pytorch.org/memory_viz and torch.cuda._memory_viz: "segments" (the state at the end:
// PyTorch's segments and blocks when the trace has the torch bridge's events, else every live
// runtime allocation as a segment holding one block) and "device_traces" (per device, the last
// kMaxMemvizTraceEntries events with their frames).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace gpumemshim::analyzer {

inline constexpr size_t kMaxMemvizTraceEntries = 100000;  // per device, like a typical
                                                          // _record_memory_history(max_entries)

// The snapshot as JSON (dicts, lists, ints, strings). Throws TraceError.
nlohmann::json memviz_snapshot(const std::string& path);

// A pickle (protocol 2) of a JSON value: objects → dict, arrays → list, strings → str (invalid
// UTF-8 replaced), integers → int, floats → float, booleans, null → None.
std::string to_pickle(const nlohmann::json& value);

}  // namespace gpumemshim::analyzer

// Reads one trace file: header, then every record, fed to a Replay. Throws TraceError.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "gpumemshim/analyzer/model.h"
#include "gpumemshim/analyzer/replay.h"

namespace gpumemshim::analyzer {

struct LoadedTrace {
  std::string path;
  ProcessInfo process;
  std::vector<DeviceInfo> devices;
  std::vector<ModuleInfo> modules;  // in trace order (re-emitted after dlopen)
  std::unordered_map<uint64_t, std::vector<uint64_t>> stacks;  // id -> pcs, innermost first
  std::vector<std::pair<std::string, std::string>> attributes;
  TraceStats stats;
  Replay replay;
  bool truncated = false;   // the file ends inside a record: read up to there
  uint64_t truncated_at = 0;
  bool clean_exit = false;  // an End record was read
  uint64_t end_time_ns = 0;
  double duration_s() const;
};

// Throws TraceError("<path>: <reason>") for anything that is not a usable trace.
LoadedTrace load_trace(const std::string& path);

}  // namespace gpumemshim::analyzer

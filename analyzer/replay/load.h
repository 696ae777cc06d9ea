// Loads one trace: the trace reader's records, fed to a Replay and kept in a LoadedTrace. Throws
// TraceError.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "findings/backward_attribution.h"
#include "gpumemshim/analyzer/errors.h"
#include "gpumemshim/format/trace_reader.h"
#include "replay/model.h"
#include "replay/replay.h"
#include "symbolize/symbol_warmup.h"

namespace gpumemshim::analyzer {

// A Python code object (PyCode record): enough to name a frame and find its line.
struct PyCodeInfo {
  std::string filename;
  std::string name;        // qualified name
  std::string line_table;  // raw co_linetable
  uint64_t first_line = 0;
  uint8_t python_minor = 0;
};

struct LoadedTrace {
  std::string path;
  ProcessInfo process;
  std::vector<DeviceInfo> devices;
  std::vector<ModuleInfo> modules;  // in trace order (re-emitted after dlopen)
  std::unordered_map<uint64_t, std::vector<uint64_t>> stacks;  // id -> pcs, innermost first
  // Python frames of a stack id (PyStack records), innermost first; code ids key py_codes.
  std::unordered_map<uint64_t, std::vector<format::PyFrameRef>> py_stacks;
  std::unordered_map<uint64_t, PyCodeInfo> py_codes;
  // Stacks described by a label instead of frames (StackLabel records: a grad_fn's type name).
  std::unordered_map<uint64_t, std::string> stack_labels;
  // Stack ids the analyzer made for autograd-thread events inside a backward pass (see
  // backward_attribution.h): own stack + the backward() caller's stack.
  AttributedStacks attributed_stacks;
  std::vector<std::pair<std::string, std::string>> attributes;
  TraceStats stats;
  Replay replay;
  MarkerLog markers;
  bool truncated = false;   // the file ends inside a record: read up to there
  uint64_t truncated_at = 0;
  bool clean_exit = false;  // an End record was read
  format::TraceIntegrity integrity;  // what the reader vouches for, once the read is done
  format::Version version;
  uint64_t end_time_ns = 0;
  // The modules its stacks point into, opened on a spare core while it loaded; the first StackView
  // takes them (null: no core to spare).
  std::unique_ptr<SymbolWarmup> symbols;
  // When the trace ends: its End record, or its last event when later (or there is no End).
  uint64_t end_ns() const;
  double duration_s() const;
};

// The threads a load runs on besides the caller's, which reads, orders and decodes.
struct LoadThreads {
  bool replay_thread = false;  // the replay on a thread of its own (same result, sooner)
  unsigned read_threads = 0;   // format 3: threads that check and decompress blocks ahead
  bool symbol_warmup = false;  // the stacks' modules opened ahead (SymbolWarmup), little CPU
};
// What `cores` cores are best spent on for one trace of version `v`. A second core takes the
// replay, the reader keeps reading, ordering and decoding, and LZ4 blocks (3.3 on) are decompressed
// by the reader or, between its batches, by the replay thread (ReadHelp), whichever is idle. A third
// core takes a read thread, which decompresses and checks blocks ahead of the reader; one keeps up
// with the replay. zstd blocks (3.0-3.2) decompress about as slowly as the replay runs: they get
// read threads first, the replay thread from the third core. With a second core, also the symbols'
// warm-up, which mostly waits and fits in the gaps the others leave.
LoadThreads plan_threads(unsigned cores, format::Version v);

// Throws TraceError("<path>: <reason>") for anything that is not a usable trace. site_groups: see
// Replay::set_site_groups (the timeline's second read, when sites symbolize alike). cores: how
// many this load may keep busy (plan_threads).
LoadedTrace load_trace(const std::string& path, const std::vector<uint32_t>& site_groups = {},
                       unsigned cores = 1);

// f(), with the trace reader's errors thrown as TraceError (the analyzer's one error type).
template <typename F>
auto reading_trace(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const format::TraceReadError& e) {
    throw TraceError(e.what());
  }
}

}  // namespace gpumemshim::analyzer

// The top of the analyzer: several traces (one per process) → one report model.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "findings/growth.h"
#include "replay/load.h"
#include "gpumemshim/analyzer/model.h"
#include "findings/ranks.h"
#include "gpumemshim/analyzer/suppressions.h"

namespace gpumemshim::analyzer {

class StackView;

// A group of surviving allocations that share a call site (symbolized stack + api + memory kind).
struct SiteGroup {
  std::string id;            // stable short hex hash of the symbolized stack + api
  std::string kind;          // DESIGN §8: "leak" (fails check), "cached" (a caching allocator's
                             // segment in a trace with torch events), "retained" (made before the
                             // first step, or not accumulating); address space: "unreleased"
  std::string reason;        // one sentence: why it is (not) a leak
  std::string region;        // the expect_no_leak region it was allocated in, if that decided it
  std::string owner;         // a library whose own buffers these are ("nccl"), else empty
  uint64_t bytes = 0;
  uint64_t count = 0;
  Api api = Api::kUnknown;
  MemoryKind memory = MemoryKind::kDevice;
  bool torch_block = false;  // PyTorch tensor blocks: api "torch.alloc", memory "torch_block"
  int32_t device = 0;        // -1 when the group spans several devices
  uint64_t pid = 0;
  int64_t rank = -1;         // the process's rank (-1: none)
  uint64_t first_time_ns = 0;
  std::vector<Frame> stack;  // innermost user frame first
  bool suppressed = false;
  std::string suppressed_by;  // the pattern
};

// An OOM judged for fragmentation: was there enough free memory in total?
struct OomFinding {
  uint64_t time_ns = 0;
  uint64_t requested = 0;
  bool torch = false;              // the caching allocator's state is known
  uint64_t reserved = 0;
  uint64_t allocated = 0;
  uint64_t largest_free_block = 0;
  bool has_device_free = false;
  uint64_t device_free = 0;
  bool enough_total_free = false;  // reserved - allocated >= requested, or device free >= requested
  std::vector<Frame> stack;
  bool suppressed = false;
  std::string suppressed_by;
};

// Fragmentation of one device of one process (JSON: fragmentation.per_device[]).
struct DeviceFragmentation {
  uint64_t pid = 0;
  int64_t rank = -1;
  int32_t device = 0;
  bool torch = false;  // caching-allocator events exist: the reserved/allocated fields mean something
  uint64_t reserved_peak = 0;
  uint64_t allocated_at_reserved_peak = 0;
  uint64_t max_reserved_minus_allocated = 0;
  uint64_t reserved_end = 0;
  uint64_t allocated_end = 0;
  std::string snapshot;  // when the block figures were taken: "oom" (the first) or "end"
  uint64_t inactive_split_blocks = 0;
  uint64_t inactive_split_bytes = 0;
  uint64_t largest_free_block = 0;
  bool has_untracked = false;  // a cudaMemGetInfo sample exists
  uint64_t untracked = 0;
  uint64_t device_total = 0;   // Device record, else the last cudaMemGetInfo total; 0 unknown
  std::vector<OomFinding> ooms;
};

// A recommendation (JSON: recommendations[]): always tied to a finding and its numbers.
struct Advice {
  std::string id;
  std::string title;
  std::string action;
  std::string finding;
  std::string evidence;
};

struct Failure {
  FailureEvent event;
  uint64_t pid = 0;
  std::vector<Frame> stack;
};

struct ProcessReport {
  std::string trace;
  ProcessInfo info;
  std::vector<DeviceInfo> devices;
  std::vector<std::pair<std::string, std::string>> attributes;
  TraceStats stats;
  Summary summary;
  bool truncated = false;
  uint64_t truncated_at = 0;
  bool clean_exit = false;
  double duration_s = 0;
  std::vector<SiteGroup> leaks;          // bytes descending; suppressed ones included (flagged)
  std::vector<SiteGroup> address_space;  // unreleased mappings / reservations
  std::vector<Failure> failures;         // in time order
  std::vector<Growth> growth;            // bytes_per_step descending; suppressed ones flagged
  std::vector<DeviceFragmentation> fragmentation;
  std::vector<Advice> advice;
  uint64_t peak_in_step_bytes = 0;        // at the device-memory peak: made in the current step
  uint64_t torch_peak_bytes = 0;          // peak of live tensor blocks
  uint64_t torch_peak_in_step_bytes = 0;  // ... of which made in the current step
  uint64_t peak_time_ns = 0;             // when the device-memory peak was reached
  uint64_t torch_peak_time_ns = 0;       // when the tensor-block peak was reached
  std::vector<MarkerEvent> markers;      // in time order; the earliest MarkerLog::kKeep
  uint64_t markers_dropped = 0;          // markers not kept (beyond MarkerLog::kKeep)
  std::vector<SiteBytes> peak_sites;     // what each site held at this process's peak (ranks.h)
};

struct Report {
  std::vector<ProcessReport> processes;
  // Sums over processes. peak_bytes is the sum of per-process peaks (an upper bound of the
  // simultaneous peak: processes are not aligned in time).
  Summary summary;
  std::vector<Suppression> suppressions_used;  // with hit counts, when suppressions were given
  Ranks ranks;  // per rank and the imbalance between ranks, with 2 or more processes
};

struct AnalyzeOptions {
  const Suppressions* suppressions = nullptr;
  size_t max_frames = 32;
  size_t jobs = 0;        // cores to use; 0: one per hardware thread. Traces are analysed at once
                          // up to that; with cores to spare, each one's replay gets a thread
  bool progress = false;  // a progress line on stderr (when it is a terminal, after ~2 s)
  // Called with each loaded trace (its index in paths) after its analysis, on the worker that
  // loaded it, so more can be derived from it without loading it again (e.g. its timeline), with
  // the analysis's symbolized stacks (max_frames frames at most) to reuse.
  std::function<void(size_t, const LoadedTrace&, StackView&)> with_trace;
};

// Throws TraceError for an unusable trace.
Report analyze(const std::vector<std::string>& paths, const AnalyzeOptions& options = {});
// With `stacks` (a view of this trace made with options.max_frames), its symbolized stacks are
// used and kept; without, the analysis makes its own.
ProcessReport analyze_trace(const LoadedTrace& trace, const AnalyzeOptions& options,
                            Suppressions* suppressions, StackView* stacks = nullptr);

// All unsuppressed findings that fail `check` (kind "leak"), or every leak entry of any kind
// when include_suppressed (the report's list), bytes descending.
std::vector<const SiteGroup*> all_leaks(const Report& report, bool include_suppressed);

}  // namespace gpumemshim::analyzer

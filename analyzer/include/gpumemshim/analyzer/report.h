// The typed report: what the analysis of one or more traces found, as plain structs. Every writer
// (text, JSON, HTML, JUnit, SARIF, diff) renders this; none reads another writer's output. The
// JSON form of each struct is documented in docs/report-json.md.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpumemshim/format/records.h"
#include "gpumemshim/format/trace_reader.h"

namespace gpumemshim::analyzer {

using format::Api;
using format::IntegrityStatus;
using format::MemoryKind;

inline constexpr const char* kReportSchema = "gpumemshim-report/1";

// One native or Python frame after symbolization (a raw pc may give several: inlined ones first).
struct Frame {
  std::string function;
  std::string file;
  uint32_t line = 0;
  std::string module;
  uint64_t pc = 0;
  uint64_t module_offset = 0;  // pc - load bias; 0 when no module is known
  bool inlined = false;
  bool python = false;
};

struct DeviceInfo {
  int32_t device = 0;
  uint64_t total_bytes = 0;
  std::string name;
};

struct ProcessInfo {
  uint64_t pid = 0;
  uint64_t ppid = 0;
  int64_t rank = -1;
  uint64_t start_wall_ns = 0;
  uint64_t start_mono_ns = 0;
  std::string host;
  std::string command_line;
  std::string executable;
  bool has_process_record = false;
};

// Record counts and sizes of one trace file.
struct TraceStats {
  uint64_t file_bytes = 0;
  uint16_t version_major = 0;
  uint16_t version_minor = 0;
  uint64_t records = 0;
  std::array<uint64_t, 256> by_type{};  // by RecordType value
  uint64_t unknown_records = 0;
  std::array<uint64_t, format::kApiCount> allocs_by_api{};
  std::array<uint64_t, format::kApiCount> frees_by_api{};
  std::array<uint64_t, format::kApiCount> failed_by_api{};
  std::array<uint64_t, format::kApiCount> bytes_by_api{};  // bytes allocated (successful)
  uint64_t unknown_api = 0;                                // events whose api is out of range
  uint64_t max_order_window = 0;  // the most events held at once to replay them in time order
  bool buffered_read = false;     // the streaming read gave up and every event was held
  std::string buffered_because;   // why
  uint64_t late_events = 0;       // stragglers replayed where they were read, not at their time
  uint64_t max_lateness_ns = 0;
  uint64_t events() const;  // alloc + free + failed + meminfo + marker records
};

// Per memory kind: index = MemoryKind value (0 unused).
struct KindCounters {
  uint64_t allocations = 0;
  uint64_t frees = 0;
  uint64_t live_count = 0;
  uint64_t live_bytes = 0;
  uint64_t peak_bytes = 0;
};
using ByKind = std::array<KindCounters, format::kMemoryKindMax + 1>;

// PyTorch caching-allocator events (TorchEvent records of the torch bridge).
struct TorchCounters {
  uint64_t events = 0;          // every TorchEvent record, any action
  uint64_t allocs = 0;          // tensor blocks handed out
  uint64_t frees = 0;           // blocks back in the cache (free_completed)
  uint64_t segment_allocs = 0;
  uint64_t segment_frees = 0;
  uint64_t ooms = 0;
  uint64_t live_blocks = 0;     // at the end of the trace
  uint64_t live_block_bytes = 0;
};

struct Summary {
  uint64_t allocations = 0;         // successful allocation records
  uint64_t frees = 0;               // successful frees that matched a live allocation
  uint64_t failed_allocations = 0;  // AllocFailed records
  uint64_t failed_frees = 0;        // frees with a nonzero result (the memory stays)
  uint64_t unmatched_frees = 0;     // successful frees of an address not known to be live
  uint64_t peak_bytes = 0;          // peak of live device memory (device+managed+pool+physical)
  uint64_t leaked_bytes = 0;        // after suppressions
  uint64_t leaked_allocations = 0;  // after suppressions
  uint64_t suppressed_bytes = 0;
  uint64_t suppressed_allocations = 0;
  uint64_t retained_bytes = 0;      // kind "retained" (made before the first step), unsuppressed
  // kind "alive": alive when an incomplete trace (no End) stopped; never counted as leaked
  uint64_t alive_at_trace_end_bytes = 0;
  uint64_t alive_at_trace_end_allocations = 0;
  uint64_t cached_bytes = 0;        // kind "cached" (a caching allocator's segments at the end)
  // kind "library": memory libraries keep for themselves (handles, workspaces); never leaked
  uint64_t library_bytes = 0;
  uint64_t library_allocations = 0;
  uint64_t markers = 0;
  uint64_t steps = 0;
  uint64_t ranges = 0;  // range pushes (NVTX ranges, expect_no_leak regions)
  ByKind by_kind{};
  TorchCounters torch{};
};

// One marker record, as the report lists it.
struct MarkerEvent {
  uint64_t time_ns = 0;
  uint64_t thread_id = 0;
  format::MarkerKind kind = format::MarkerKind::kMark;
  std::string name;
  uint64_t seq = 0;  // the reader's delivery order (time, then file): breaks time ties
};

// A group of surviving allocations that share a call site (symbolized stack + api + memory kind).
struct SiteGroup {
  std::string id;            // stable short hex hash of the symbolized stack + api
  std::string kind;          // "leak" (fails check), "cached" (a caching allocator's segment in a
                             // trace with torch events), "retained" (made before the first step,
                             // or not accumulating), "library" (a library's own memory: a handle,
                             // a workspace), "alive" (alive when a trace without End stopped: the
                             // process did not exit); address space: "unreleased"
  std::string reason;        // one sentence: why it is (not) a leak
  std::string region;        // the expect_no_leak region it was allocated in, if that decided it
  std::string owner;         // the library whose own memory this is ("cublas", "nccl", "torch"...)
  std::string owner_call;    // the library's call that made it ("cublasCreate_v2")
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
  // VMM physical memory released while still mapped: `stack` is the cuMemMap that holds it, this
  // the cuMemCreate that made it (empty otherwise).
  std::vector<Frame> created_stack;
  bool suppressed = false;
  std::string suppressed_by;  // the pattern
};

// A site whose live bytes rise steadily: live bytes sampled at step boundaries (or, without step
// markers, at the ends of windows of each thread's allocations) and a robust trend fit.
struct Growth {
  std::string id;             // the site id (same as the site's leak entries)
  std::string basis;          // "steps", or "allocations" (no step markers: allocation windows)
  double bytes_per_step = 0;  // per unit: per step, or per window for basis "allocations"
  uint64_t window_allocations = 0;  // basis "allocations": allocations of each thread per window
  // What bytes_per_step is per, in words: "step", or "window of N allocations per thread".
  std::string unit = "step";
  uint64_t steps = 0;         // boundaries (steps or windows) used in the fit
  uint64_t warmup_steps = 0;  // excluded at the start
  uint64_t last_step = 0;     // the last boundary sampled
  uint64_t first_live_bytes = 0;
  uint64_t last_live_bytes = 0;
  double confidence = 0;
  bool has_projection = false;
  uint64_t projected_oom_step = 0;  // the boundary (step or window) at which the device is full
  Api api = Api::kUnknown;
  MemoryKind memory = MemoryKind::kDevice;
  bool torch_block = false;
  int32_t device = 0;
  uint64_t pid = 0;
  int64_t rank = -1;
  std::vector<Frame> stack;
  bool suppressed = false;
  std::string suppressed_by;
  // Why it grows, when the trace shows it (findings/retained_graph.h): "retained_graph" (the
  // blocks of forward passes outlive the backward pass after them, step after step); else empty.
  std::string cause;
  std::string graph_made_at;     // retained_graph: the loop line whose forward pass made them
  std::string graph_held_at;     // ... the line that keeps the graph ("file:line"; empty: not seen)
  std::string graph_held_how;    // ... what that line does ("appends it to a list", ...)
  std::string graph_held_text;   // ... that line, as the source reads
};

// An OOM judged by what limited it: the process's own cap, the device, or fragmentation.
struct OomFinding {
  uint64_t time_ns = 0;
  uint64_t requested = 0;
  bool torch = false;              // the caching allocator's state is known
  uint64_t reserved = 0;
  uint64_t allocated = 0;
  uint64_t largest_free_block = 0;
  bool has_device_free = false;
  uint64_t device_free = 0;
  uint64_t limit_bytes = 0;    // the process's own cap (memory fraction); 0: none known
  double memory_fraction = 0;  // the fraction behind limit_bytes; 0: not known
  // reserved - allocated >= requested, or the free memory the process could still get (the
  // device's free bytes, within its own cap when one is known) >= requested
  bool enough_total_free = false;
  // What stopped it, measured: "fragmentation" (the cache's free bytes would have held it, no
  // free block could), "memory_limit" (the process's cap was reached), "device_full" (the device
  // had less free than asked), "unexplained" (enough free memory on the device and under every
  // known limit: a cap the trace does not know, or another process took it first), "unknown" (no
  // free-memory figure)
  std::string cause;
  std::string verdict;  // one sentence with the numbers that say so
  std::vector<Frame> stack;
  bool suppressed = false;
  std::string suppressed_by;
};

// Fragmentation of one device of one process.
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
  uint64_t limit_bytes = 0;    // the process's own cap on the device (memory_limit.h); 0: none
  double memory_fraction = 0;  // the fraction behind it; 0: not known
  std::vector<OomFinding> ooms;
};

// A recommendation: always tied to a finding ("leak:<id>", "growth:<id>",
// "fragmentation:<pid>:<device>", ...) and the numbers that justify it.
struct Advice {
  std::string id;
  std::string title;
  std::string action;
  std::string finding;
  std::string evidence;
};

// A failed allocation as the trace recorded it.
struct FailedAllocation {
  uint64_t time_ns = 0;
  uint64_t thread_id = 0;
  int32_t device = 0;
  Api api = Api::kUnknown;
  MemoryKind kind = MemoryKind::kDevice;
  uint64_t size = 0;
  uint32_t error = 0;
  uint64_t live_device_bytes = 0;  // of this process when it failed
  bool has_meminfo = false;        // last cudaMemGetInfo sample of that device, if any
  uint64_t meminfo_free = 0;
  uint64_t meminfo_total = 0;
};

struct Failure {
  FailedAllocation event;
  uint64_t pid = 0;
  std::vector<Frame> stack;
};

// What one symbolized call site held when its process peaked (same id as leaks and growth).
struct SiteBytes {
  std::string id;
  uint64_t bytes = 0;
  Api api = Api::kUnknown;
  std::vector<Frame> stack;
};

// A finding of one rank, by reference: kind "leak" | "growth" | "failed_allocation".
struct RankFinding {
  std::string kind;
  std::string id;      // site id; for failed allocations the api name
  uint64_t bytes = 0;  // leaked bytes, growth bytes per step, or bytes asked for
};

struct RankEntry {
  int64_t rank = -1;  // -1: the process had no rank in its environment
  uint64_t pid = 0;
  std::string host;
  size_t process = 0;  // index into Report::processes
  uint64_t peak_bytes = 0;
  uint64_t leaked_bytes = 0;
  int64_t growth_bytes_per_step = 0;  // sum over the rank's growing sites (step-based fits)
  std::vector<RankFinding> findings;
};

struct SiteDiff {
  std::string id;
  int64_t bytes_diff = 0;  // heaviest's bytes at its peak minus lightest's at its peak
  uint64_t heaviest_bytes = 0;
  uint64_t lightest_bytes = 0;
  std::vector<Frame> stack;
};

// Several processes (torchrun ranks, fork children) reported together: a summary per rank, the
// imbalance between the heaviest and the lightest, and the call sites that explain it.
struct Ranks {
  std::vector<RankEntry> per_rank;  // by rank, then pid; empty with fewer than 2 processes
  size_t heaviest = 0;              // indexes into per_rank
  size_t lightest = 0;
  std::vector<SiteDiff> sites;      // bytes_diff descending, positive only, at most kMaxSites
  static constexpr size_t kMaxSites = 10;
  bool present() const { return per_rank.size() >= 2; }
};

struct TimelineSite {
  std::string id;     // the leak report's site id (same stack and api → same id)
  std::string label;  // "file:line function" of the innermost user frame
  std::vector<Frame> stack;
  uint64_t peak_bytes = 0;  // the site's own highest live bytes
};

struct TimelineSample {
  uint64_t time_ns = 0;
  uint64_t live_bytes = 0;
  uint64_t reserved_bytes = 0;   // meaningful when Timeline::has_torch
  uint64_t allocated_bytes = 0;
  std::vector<uint64_t> sites;   // per Timeline::sites, then "other" last
};

struct PeakSite {
  size_t site = 0;  // index into Timeline::all_sites
  uint64_t bytes = 0;
};

// Memory over time of one process: live device bytes sampled (every bucket's lowest and highest
// point kept, so the peak survives downsampling), split by the top call sites, with the step marks
// and, when PyTorch's allocator reported its events, reserved and allocated bytes.
struct Timeline {
  std::vector<TimelineSite> sites;      // the top sites by peak_bytes, descending
  std::vector<TimelineSite> all_sites;  // every site (for the peak breakdown)
  std::vector<TimelineSample> samples;  // in time order
  std::vector<uint64_t> steps_ns;       // step markers
  bool has_torch = false;
  uint64_t peak_bytes = 0;
  uint64_t peak_time_ns = 0;
  std::vector<PeakSite> at_peak;  // sites alive at the (first) peak, bytes descending
};

// The reports list the first this many of Timeline::at_peak (and diff compares those).
inline constexpr size_t kReportedPeakSites = 20;

// What held device memory, by category (torch.profiler's memory timeline's, with no change to the
// program): PyTorch's tensor blocks by what they are to training (told by the Python package's tags
// and the backward passes it marks), the caching allocator's cache (reserved, not allocated), and
// device memory outside PyTorch's allocator (the CUDA context's allocations, cuBLAS/cuDNN
// workspaces, NCCL, other libraries). Values are indexes of CategoryBytes::bytes.
enum class MemoryCategory : uint8_t {
  kParameter,
  kGradient,
  kOptimizerState,
  kActivation,  // saved for backward
  kTemporary,   // every other tensor block
  kAllocatorCache,
  kOutsideTorch,
};
inline constexpr size_t kMemoryCategoryCount = 7;
// "parameter", "gradient", "optimizer_state", "activation", "temporary", "allocator_cache",
// "outside_torch".
std::string_view memory_category_name(MemoryCategory category);

// The categories at one moment. They add up to the live device memory the trace saw then, when the
// trace saw every segment of the allocator; memory in use on the device that no allocation of the
// trace explains is apart.
struct CategoryBytes {
  uint64_t time_ns = 0;
  std::array<uint64_t, kMemoryCategoryCount> bytes{};
  bool has_not_explained = false;  // a cudaMemGetInfo sample (or the OOM's free bytes) exists
  uint64_t not_explained = 0;      // device used minus the live device memory the trace saw
  uint64_t total() const;
  uint64_t of(MemoryCategory c) const { return bytes[static_cast<size_t>(c)]; }
};

// At an out-of-memory: PyTorch's OOM, or a failed device allocation on a device without one.
struct CategoryOom {
  int32_t device = 0;
  uint64_t requested = 0;
  bool torch = false;
  CategoryBytes at;  // that device's memory
  // Of the temporaries, those of the forward or backward pass the OOM stopped (made by the forward
  // in progress, or saved and not yet freed by the backward in progress): that pass's activations
  // as far as the trace can tell, since a pass that never ends never confirms them.
  uint64_t in_pass = 0;
};

// The highest point of device memory within a window of steps (basis "steps": first and last are
// step numbers, the steps counted before the window) or of time (basis "time": first and last are
// times in ns).
struct CategoryWindow {
  uint64_t first = 0;
  uint64_t last = 0;
  CategoryBytes at_peak;
};

// A call site holding tensor blocks of one category at the peak (the leak report's site id).
struct CategorySite {
  MemoryCategory category = MemoryCategory::kTemporary;
  std::string id;
  uint64_t bytes = 0;
  std::vector<Frame> stack;
};

// Memory by category of one process with PyTorch's allocator events.
struct MemoryCategories {
  bool tagged = false;          // tags or marked backward passes: tensor categories are known
  uint64_t tags = 0;            // tag events read
  uint64_t unmatched_tags = 0;  // ... naming no live tensor block
  CategoryBytes peak;           // at the device-memory peak (its moment holding most tensor bytes)
  std::vector<CategorySite> peak_sites;  // per tensor category, its largest sites at the peak
  // The largest sites of tensor blocks alive at the end that a forward pass made and that outlived
  // the backward pass after it (category temporary): an autograd graph kept past its step, with
  // its saved activations, or a forward pass's outputs kept.
  std::vector<CategorySite> kept_sites;
  std::vector<CategoryOom> ooms;         // in time order
  std::string basis;                     // of windows: "steps" or "time"
  std::vector<CategoryWindow> windows;   // in order; at most kMaxCategoryWindows
};
inline constexpr size_t kMaxCategoryWindows = 512;
inline constexpr size_t kMaxCategorySites = 10;  // per category

// A suppression entry (suppressions.h) with what it silenced.
struct Suppression {
  std::string type;     // "leak", "growth", "retained" or "fragmentation"
  std::string pattern;
  std::string source;   // "file:line"
  uint64_t hit_count = 0;  // leak groups suppressed
  uint64_t hit_bytes = 0;
};

// What the trace reader could vouch for in one trace (format's TraceIntegrity, with its name and
// the text of the shim's write error), so that every output can say whether to trust it.
struct Integrity {
  IntegrityStatus status = IntegrityStatus::kUnchecked;
  std::string name;    // integrity_name(): "complete", "unchecked (format 2)", "incomplete", ...
  bool clean = true;   // complete or unchecked: the process ended and nothing known is missing
  bool checked = false;
  bool ended = false;  // an End record was read
  std::string detail;  // one line, empty when clean
  uint32_t write_error = 0;
  std::string write_error_text;  // strerror(write_error); empty when there was none
  uint64_t blocks = 0;
  uint64_t damaged_blocks = 0;
  uint64_t missing_blocks = 0;
  uint64_t skipped_bytes = 0;
  uint64_t records_lost = 0;
  bool records_lost_exact = false;
  uint64_t first_problem_offset = 0;
  bool truncated = false;
};

// Every byte accounted: the device's own view of the process's memory against what the trace
// explains at the same moment (findings/accounting.cpp). The difference is memory held outside the
// traced APIs, with the owners the trace gives evidence of.
struct AccountingPoint {
  std::string at;  // "peak" (the sample nearest the process's peak), "end", "oom"
  int32_t device = 0;
  uint64_t time_ns = 0;      // of the device's sample
  std::string source;        // "nvml": NVML, this process (nvidia-smi's per-process figure);
                             // "nvml_device": NVML, the whole device (this pid is not listed);
                             // "meminfo": cudaMemGetInfo's total - free, the whole device
  bool device_wide = false;  // the view includes other processes
  uint64_t device_view_bytes = 0;
  uint64_t device_total_bytes = 0;  // 0: unknown
  uint64_t traced_bytes = 0;  // live device memory of this process on the device then, as traced
  int64_t not_explained_bytes = 0;  // device view - traced; negative: the trace counts more
  // When not_explained_bytes > 0: "CUDA context", then the GPU libraries the Module records show
  // loaded ("cuBLAS", "NCCL", ...), "memory pools (cudaMallocAsync)" when the trace has
  // stream-ordered allocations, then "other processes" for a device-wide view.
  std::vector<std::string> likely_owners;
};

// Integrity from the reader's own value; version names unchecked traces ("unchecked (format 2)").
Integrity integrity_of(const format::TraceIntegrity& t, format::Version version);

// Device memory by who asked CUDA for it: a framework's allocator (PyTorch's caching allocator,
// CuPy's memory pool, XLA's allocator in jaxlib), a library on its own (NCCL, cuBLAS, cuDNN...), the
// program itself or another shared object of the user's (an extension). Told from the innermost
// native frame of each allocation outside the shim and CUDA itself.
struct LibraryMemory {
  std::string name;    // "NCCL", "PyTorch (caching allocator)", "my_ext.so"
  std::string module;  // the file name of the shared object or program; "" when no native stack
  std::string role;    // "framework", "library", "program", "python" (ctypes/cffi), "unknown"
  std::optional<uint64_t> peak_bytes;  // its own highest live bytes (unknown for the rare trace
                                       // whose changes are too many to keep: see libraries.h)
  uint64_t at_peak_bytes = 0;  // live at the process's device-memory peak
  uint64_t end_bytes = 0;      // live when the trace ended
  size_t sites = 0;            // call sites
  std::string top_site;        // the label of its call site with the highest own peak
};

// What a framework's allocator lets a CUDA-level trace see in this process: JAX's (its preallocated
// pool, a pool grown on demand, or a cudaMalloc per buffer) and CuPy's memory pool.
struct FrameworkMode {
  std::string framework;    // "JAX", "CuPy"
  std::string mode;         // "preallocated pool", "pool grown on demand", "platform allocator"...
  std::string seen_from;    // "environment" (the Python package's attributes) or "allocations"
  std::string shows;        // what the report shows of its memory
  std::string cannot_show;  // what it cannot, and why; "" when nothing is hidden
};

struct ProcessReport {
  std::string trace;
  Integrity integrity;
  bool no_memory_events = false;  // no allocation, free, failure or torch event was recorded
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
  std::vector<MarkerEvent> markers;      // in time order; the earliest ones when there are many
  uint64_t markers_dropped = 0;          // markers not kept
  std::vector<SiteBytes> peak_sites;     // what each site held at this process's peak
  std::optional<Timeline> timeline;      // made when AnalyzeOptions::timelines asks for it
  std::optional<MemoryCategories> categories;  // with PyTorch's allocator events
  // Per device: peak, end, then OOMs; empty without a device view (no NVML, no cudaMemGetInfo).
  std::vector<AccountingPoint> accounting;
  std::vector<LibraryMemory> libraries;  // at_peak_bytes, then peak_bytes descending
  std::vector<FrameworkMode> frameworks;
};

// A trace left out because another one given is the same recording: the same file (a path given
// twice, a hard or soft link) or a copy of it (same host, pid and process start time).
struct Duplicate {
  std::string trace;
  std::string same_as;  // the trace that was analysed
  std::string why;      // "the same file" or "the same recording"
};

// The verdict over every trace: can the report be trusted?
struct Verdict {
  IntegrityStatus worst = IntegrityStatus::kComplete;
  std::string status;     // the name of the worst trace's integrity
  bool trusted = true;    // every trace is clean
  size_t not_clean = 0;   // traces that are incomplete, damaged or write-failed
  std::vector<std::string> problems;  // "<trace>: <detail>", one per trace that is not clean
};

struct Report {
  std::vector<ProcessReport> processes;  // one per distinct trace, in the order given
  Verdict integrity;
  std::vector<Duplicate> duplicates;
  // Sums over processes. peak_bytes is the sum of per-process peaks (an upper bound of the
  // simultaneous peak: processes are not aligned in time).
  Summary summary;
  std::vector<Suppression> suppressions_used;  // with hit counts, when suppressions were given
  Ranks ranks;  // per rank and the imbalance between ranks, with 2 or more processes
};

// The notes every output shows: duplicates counted once, traces with no memory events.
std::vector<std::string> report_notes(const Report& report);

// All unsuppressed findings that fail `check` (kind "leak"), or every leak entry of any kind
// when include_suppressed (the report's list), bytes descending.
std::vector<const SiteGroup*> all_leaks(const Report& report, bool include_suppressed);

// Every process's growth findings, bytes_per_step descending (the report's list).
std::vector<const Growth*> all_growth(const Report& report);

}  // namespace gpumemshim::analyzer

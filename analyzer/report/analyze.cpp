#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>

#include "findings/accounting.h"
#include "findings/advice.h"
#include "findings/fragmentation.h"
#include "findings/growth_sites.h"
#include "findings/leaks.h"
#include "findings/frameworks.h"
#include "findings/libraries.h"
#include "findings/ranks.h"
#include "findings/retained_graph.h"
#include "findings/timeline.h"
#include "replay/parallel.h"
#include "report/analysis.h"
#include "report/integrity.h"
#include "report/stack_view.h"

namespace gpumemshim::analyzer {

namespace {

// Max-heap order of kept markers: the latest (then the last in the file) on top.
bool marker_before(const MarkerEvent& a, const MarkerEvent& b) {
  return a.time_ns != b.time_ns ? a.time_ns < b.time_ns : a.seq < b.seq;
}

void add(Summary& total, const Summary& s) {
  total.allocations += s.allocations;
  total.frees += s.frees;
  total.failed_allocations += s.failed_allocations;
  total.failed_frees += s.failed_frees;
  total.unmatched_frees += s.unmatched_frees;
  total.peak_bytes += s.peak_bytes;  // sum of per-process peaks: processes are not time-aligned
  total.leaked_bytes += s.leaked_bytes;
  total.leaked_allocations += s.leaked_allocations;
  total.suppressed_bytes += s.suppressed_bytes;
  total.suppressed_allocations += s.suppressed_allocations;
  total.retained_bytes += s.retained_bytes;
  total.alive_at_trace_end_bytes += s.alive_at_trace_end_bytes;
  total.alive_at_trace_end_allocations += s.alive_at_trace_end_allocations;
  total.cached_bytes += s.cached_bytes;
  total.library_bytes += s.library_bytes;
  total.library_allocations += s.library_allocations;
  total.markers += s.markers;
  total.steps += s.steps;
  total.ranges += s.ranges;
  total.torch.events += s.torch.events;
  total.torch.allocs += s.torch.allocs;
  total.torch.frees += s.torch.frees;
  total.torch.segment_allocs += s.torch.segment_allocs;
  total.torch.segment_frees += s.torch.segment_frees;
  total.torch.ooms += s.torch.ooms;
  total.torch.live_blocks += s.torch.live_blocks;
  total.torch.live_block_bytes += s.torch.live_block_bytes;
  for (size_t k = 0; k < total.by_kind.size(); ++k) {
    total.by_kind[k].allocations += s.by_kind[k].allocations;
    total.by_kind[k].frees += s.by_kind[k].frees;
    total.by_kind[k].live_count += s.by_kind[k].live_count;
    total.by_kind[k].live_bytes += s.by_kind[k].live_bytes;
    total.by_kind[k].peak_bytes += s.by_kind[k].peak_bytes;
  }
}

// Marks a finding suppressed when an entry for its kind matches its stack, counting the hit (with
// `bytes`); true when it did.
template <typename Finding>
bool suppress(Suppressions* suppressions, std::string_view kind, Finding& f, uint64_t bytes) {
  int hit = suppressions ? suppressions->match(kind, f.stack) : -1;
  if (hit < 0) return false;
  f.suppressed = true;
  f.suppressed_by = suppressions->entries()[static_cast<size_t>(hit)].pattern;
  suppressions->record_hit(hit, bytes);
  return true;
}

}  // namespace

void MarkerLog::add(const format::MarkerRecord& r) {
  uint64_t seq = total_++;
  if (r.kind == format::MarkerKind::kRangePush) ++range_pushes_;
  if (kept_.size() < kKeep) {
    kept_.push_back(MarkerEvent{r.time_ns, r.thread_id, r.kind, std::string(r.name), seq});
    if (kept_.size() == kKeep) std::make_heap(kept_.begin(), kept_.end(), marker_before);
    return;
  }
  // Full: keep it only if it is earlier than the latest kept one (seq is larger than every kept
  // one, so a time tie loses).
  if (r.time_ns >= kept_.front().time_ns) return;
  std::pop_heap(kept_.begin(), kept_.end(), marker_before);
  kept_.back() = MarkerEvent{r.time_ns, r.thread_id, r.kind, std::string(r.name), seq};
  std::push_heap(kept_.begin(), kept_.end(), marker_before);
}

std::vector<MarkerEvent> MarkerLog::sorted() const {
  std::vector<MarkerEvent> out = kept_;
  std::sort(out.begin(), out.end(), marker_before);
  return out;
}

ProcessReport analyze_trace(const LoadedTrace& trace, const AnalyzeOptions& options,
                            Suppressions* suppressions, StackView* shared_stacks) {
  ProcessReport p;
  p.trace = trace.path;
  p.integrity = integrity_of(trace.integrity, trace.version);
  p.info = trace.process;
  p.devices = trace.devices;
  p.attributes = trace.attributes;
  p.stats = trace.stats;
  p.summary = trace.replay.summary();
  p.truncated = trace.truncated;
  p.truncated_at = trace.truncated_at;
  p.clean_exit = trace.clean_exit;
  p.duration_s = trace.duration_s();
  p.summary.ranges = trace.markers.range_pushes();
  p.markers = trace.markers.sorted();
  p.markers_dropped = trace.markers.dropped();
  p.no_memory_events = has_no_memory_events(p);

  std::optional<StackView> own_stacks;
  if (shared_stacks == nullptr) own_stacks.emplace(trace, options.max_frames);
  StackView& stacks = shared_stacks ? *shared_stacks : *own_stacks;
  group_survivors(trace, stacks, p.leaks, p.address_space);
  p.peak_sites = sites_at_peak(trace, stacks);
  for (SiteGroup& g : p.leaks) g.rank = trace.process.rank;
  // Kinds and reasons are decided in group_survivors; only "leak" counts as leaked.
  // A suppression applies to the finding kind its prefix names (leak:, retained:).
  for (SiteGroup& g : p.leaks) {
    if (g.kind == "cached") {
      p.summary.cached_bytes += g.bytes;
      continue;
    }
    if (g.kind == "library") {  // never a leak: nothing to suppress
      p.summary.library_bytes += g.bytes;
      p.summary.library_allocations += g.count;
      continue;
    }
    // What was alive when an unended trace stopped is silenced by the leak: entries that would
    // have named it, but it is never counted as leaked or suppressed.
    if (g.kind == "alive") {
      if (!suppress(suppressions, "leak", g, g.bytes)) {
        p.summary.alive_at_trace_end_bytes += g.bytes;
        p.summary.alive_at_trace_end_allocations += g.count;
      }
      continue;
    }
    if (suppress(suppressions, g.kind, g, g.bytes)) {
      if (g.kind == "leak") {
        p.summary.suppressed_bytes += g.bytes;
        p.summary.suppressed_allocations += g.count;
      }
    } else if (g.kind == "leak") {
      p.summary.leaked_bytes += g.bytes;
      p.summary.leaked_allocations += g.count;
    } else if (g.kind == "retained") {
      p.summary.retained_bytes += g.bytes;
    }
  }
  p.growth = find_growth(trace, stacks);
  for (Growth& g : p.growth) suppress(suppressions, "growth", g, 0);
  p.fragmentation = find_fragmentation(trace, stacks);
  for (DeviceFragmentation& d : p.fragmentation)
    for (OomFinding& o : d.ooms) suppress(suppressions, "fragmentation", o, 0);
  for (const FailureEvent& f : trace.replay.failures())
    p.failures.push_back(Failure{f, trace.process.pid, stacks.frames(f.stack_id)});
  p.peak_in_step_bytes = trace.replay.peaks().in_step_bytes();
  p.torch_peak_bytes = trace.replay.peaks().torch_bytes();
  p.torch_peak_in_step_bytes = trace.replay.peaks().torch_in_step_bytes();
  p.peak_time_ns = trace.replay.peaks().time_ns();
  p.torch_peak_time_ns = trace.replay.peaks().torch_time_ns();
  p.categories = find_categories(trace, stacks);
  p.accounting = find_accounting(trace);
  p.libraries = find_libraries(trace, stacks);
  p.frameworks = find_framework_modes(p, device_total(p));
  find_retained_graphs(p);
  p.advice = advise(p);
  if (options.timelines)
    p.timeline = build_timeline(trace, kMaxTimelineSamples, kTimelineTopSites, &stacks);
  return p;
}

namespace {

// Each trace counted its suppression hits in its own copy (inputs[k] is report.processes[k]'s);
// the hits of the traces kept are summed into the report.
void sum_suppression_hits(Report& report, const Suppressions& given,
                          const std::vector<Suppressions>& per_trace, const std::vector<size_t>& inputs) {
  report.suppressions_used = given.entries();
  for (size_t i : inputs) {
    const Suppressions& s = per_trace[i];
    for (size_t k = 0; k < s.entries().size(); ++k) {
      report.suppressions_used[k].hit_count += s.entries()[k].hit_count - given.entries()[k].hit_count;
      report.suppressions_used[k].hit_bytes += s.entries()[k].hit_bytes - given.entries()[k].hit_bytes;
    }
  }
}

// The distinct files among paths; the others go to report.duplicates.
std::vector<size_t> distinct_files(const std::vector<std::string>& paths, Report& report) {
  std::vector<size_t> first = first_same_file(paths), out;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (first[i] == i) out.push_back(i);
    else report.duplicates.push_back(Duplicate{paths[i], paths[first[i]], "the same file"});
  }
  return out;
}

}  // namespace

// Traces are loaded and analysed on every core (parallel.h), results kept in input order. Each
// trace counts its suppression hits in its own copy; the counts are summed afterwards. A trace
// given twice (the same file, or a copy of the same recording) is analysed once.
Report analyze(const std::vector<std::string>& paths, const AnalyzeOptions& options) {
  Report report;
  std::vector<size_t> inputs = distinct_files(paths, report);
  report.processes.resize(inputs.size());
  std::vector<Suppressions> suppressions(options.suppressions ? inputs.size() : 0);
  uint64_t total_bytes = 0;
  for (size_t i : inputs) total_bytes += file_size_or_zero(paths[i]);
  Progress progress(inputs.size(), total_bytes, options.progress && Progress::stderr_is_tty());
  // Fewer traces than cores: the cores left over are shared among the traces read at once, for
  // their read and replay threads (load.h).
  const size_t cores = worker_count(options.jobs, SIZE_MAX);  // the workers of unlimited traces
  const auto cores_each = static_cast<unsigned>(cores / worker_count(options.jobs, inputs.size()));
  parallel_for(inputs.size(), options.jobs, [&](size_t k) {
    if (options.suppressions) suppressions[k] = *options.suppressions;
    LoadedTrace trace = load_trace(paths[inputs[k]], {}, cores_each);
    report.processes[k] =
        analyze_trace(trace, options, options.suppressions ? &suppressions[k] : nullptr);
    progress.add_bytes(trace.stats.file_bytes);
    progress.trace_done();
  });
  std::vector<size_t> kept(inputs.size());
  for (size_t k = 0; k < kept.size(); ++k) kept[k] = k;
  drop_same_recordings(report, kept);
  advise_shared_devices(report);
  for (const ProcessReport& p : report.processes) add(report.summary, p.summary);
  if (options.suppressions) sum_suppression_hits(report, *options.suppressions, suppressions, kept);
  report.ranks = compute_ranks(report);
  report.integrity = verdict_of(report.processes);
  return report;
}

std::vector<const SiteGroup*> all_leaks(const Report& report, bool include_suppressed) {
  std::vector<const SiteGroup*> out;
  for (const ProcessReport& p : report.processes)
    for (const SiteGroup& g : p.leaks)
      if (include_suppressed || (!g.suppressed && g.kind == "leak")) out.push_back(&g);
  std::stable_sort(out.begin(), out.end(),
                   [](const SiteGroup* a, const SiteGroup* b) { return a->bytes > b->bytes; });
  return out;
}

std::vector<const Growth*> all_growth(const Report& report) {
  std::vector<const Growth*> out;
  for (const ProcessReport& p : report.processes)
    for (const Growth& g : p.growth) out.push_back(&g);
  std::stable_sort(out.begin(), out.end(),
                   [](const Growth* a, const Growth* b) { return a->bytes_per_step > b->bytes_per_step; });
  return out;
}

}  // namespace gpumemshim::analyzer

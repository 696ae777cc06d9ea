#include <fmt/format.h>

#include "gpumemshim/analyzer/render.h"
#include "render/accounting_render.h"
#include "render/frameworks_render.h"
#include "render/libraries_render.h"
#include "render/json_parts.h"
#include "render/sites.h"

namespace gpumemshim::analyzer {

using nlohmann::json;

namespace {

json by_kind_json(const ByKind& by_kind) {
  json o = json::object();
  for (uint8_t k = 1; k <= format::kMemoryKindMax; ++k) {
    const KindCounters& c = by_kind[k];
    o[std::string(format::memory_kind_name(static_cast<MemoryKind>(k)))] = {
        {"allocations", c.allocations}, {"frees", c.frees}, {"live_count", c.live_count},
        {"live_bytes", c.live_bytes}, {"peak_bytes", c.peak_bytes}};
  }
  return o;
}

// Calls per API as recorded: allocations and failures under the allocating API, frees under the
// freeing one. Only APIs that occur are listed.
json by_api_json(const std::vector<const TraceStats*>& all) {
  json o = json::object();
  for (uint8_t a = 1; a < format::kApiCount; ++a) {
    uint64_t allocs = 0, frees = 0, failed = 0, bytes = 0;
    for (const TraceStats* st : all) {
      allocs += st->allocs_by_api[a];
      frees += st->frees_by_api[a];
      failed += st->failed_by_api[a];
      bytes += st->bytes_by_api[a];
    }
    if (allocs + frees + failed == 0) continue;
    o[std::string(format::api_name(static_cast<Api>(a)))] = {
        {"allocations", allocs}, {"frees", frees}, {"failed", failed}, {"bytes", bytes}};
  }
  return o;
}

// Findings a suppression silenced keep their place in the report, flagged.
template <typename Finding>
void mark_suppressed(json& o, const Finding& f) {
  if (!f.suppressed) return;
  o["suppressed"] = true;
  o["suppressed_by"] = f.suppressed_by;
}

json summary_json(const Summary& s) {
  return {{"allocations", s.allocations},
          {"frees", s.frees},
          {"failed_allocations", s.failed_allocations},
          {"failed_frees", s.failed_frees},
          {"unmatched_frees", s.unmatched_frees},
          {"peak_bytes", s.peak_bytes},
          {"leaked_bytes", s.leaked_bytes},
          {"leaked_allocations", s.leaked_allocations},
          {"suppressed_bytes", s.suppressed_bytes},
          {"suppressed_allocations", s.suppressed_allocations},
          {"retained_bytes", s.retained_bytes},
          {"alive_at_trace_end_bytes", s.alive_at_trace_end_bytes},
          {"alive_at_trace_end_allocations", s.alive_at_trace_end_allocations},
          {"cached_bytes", s.cached_bytes},
          {"library_bytes", s.library_bytes},
          {"library_allocations", s.library_allocations},
          {"markers", s.markers},
          {"steps", s.steps},
          {"ranges", s.ranges},
          {"by_kind", by_kind_json(s.by_kind)},
          {"torch",
           {{"allocs", s.torch.allocs},
            {"frees", s.torch.frees},
            {"segment_allocs", s.torch.segment_allocs},
            {"segment_frees", s.torch.segment_frees},
            {"ooms", s.torch.ooms},
            {"live_blocks", s.torch.live_blocks},
            {"live_block_bytes", s.torch.live_block_bytes}}}};
}

json group_json(const SiteGroup& g) {
  json o = {{"id", g.id},
            {"kind", g.kind},
            {"reason", g.reason},
            {"bytes", g.bytes},
            {"count", g.count},
            {"api", api_label(g.torch_block, g.api)},
            {"memory", memory_label(g.torch_block, g.memory)},
            {"device", g.device},
            {"pid", g.pid},
            {"rank", g.rank},
            {"first_time_s", static_cast<double>(g.first_time_ns) / 1e9},
            {"stack", frames_to_json(g.stack)}};
  if (!g.region.empty()) o["region"] = g.region;
  if (!g.owner.empty()) o["owner"] = g.owner;
  if (!g.owner_call.empty()) o["owner_call"] = g.owner_call;
  if (!g.created_stack.empty()) o["created_stack"] = frames_to_json(g.created_stack);
  mark_suppressed(o, g);
  return o;
}

json growth_json(const Growth& g) {
  json o = {{"id", g.id},
            {"basis", g.basis},
            {"unit", g.unit},
            {"bytes_per_step", static_cast<uint64_t>(g.bytes_per_step)},
            {"steps", g.steps},
            {"warmup_steps", g.warmup_steps},
            {"last_step", g.last_step},
            {"first_live_bytes", g.first_live_bytes},
            {"last_live_bytes", g.last_live_bytes},
            {"confidence", g.confidence},
            {"projected_oom_step", json()},
            {"device", g.device},
            {"pid", g.pid},
            {"rank", g.rank},
            {"api", api_label(g.torch_block, g.api)},
            {"memory", memory_label(g.torch_block, g.memory)},
            {"stack", frames_to_json(g.stack)}};
  auto or_null = [](const std::string& v) { return v.empty() ? json() : json(v); };
  o["cause"] = g.cause.empty() ? json()
                               : json{{"kind", g.cause},
                                      {"made_at", or_null(g.graph_made_at)},
                                      {"held_at", or_null(g.graph_held_at)},
                                      {"held_how", or_null(g.graph_held_how)},
                                      {"held_line", or_null(g.graph_held_text)}};
  if (g.has_projection) o["projected_oom_step"] = g.projected_oom_step;
  if (g.basis == "allocations") o["window_allocations"] = g.window_allocations;
  mark_suppressed(o, g);
  return o;
}

// Fields that only the caching allocator's events can fill are null without them.
json fragmentation_json(const DeviceFragmentation& d) {
  auto torch_only = [&](uint64_t v) { return d.torch ? json(v) : json(); };
  json ooms = json::array();
  for (const OomFinding& o : d.ooms) {
    json e = {{"time_s", static_cast<double>(o.time_ns) / 1e9},
              {"requested_bytes", o.requested},
              {"reserved_bytes", o.torch ? json(o.reserved) : json()},
              {"allocated_bytes", o.torch ? json(o.allocated) : json()},
              {"device_free_bytes", o.has_device_free ? json(o.device_free) : json()},
              {"largest_free_block_bytes", o.torch ? json(o.largest_free_block) : json()},
              {"enough_total_free", o.enough_total_free},
              {"cause", o.cause},
              {"verdict", o.verdict},
              {"limit_bytes", o.limit_bytes ? json(o.limit_bytes) : json()},
              {"memory_fraction", o.memory_fraction > 0 ? json(o.memory_fraction) : json()},
              {"source", o.torch ? "torch" : "runtime"},
              {"stack", frames_to_json(o.stack)}};
    mark_suppressed(e, o);
    ooms.push_back(std::move(e));
  }
  return {{"pid", d.pid},
          {"rank", d.rank},
          {"device", d.device},
          {"torch", d.torch},
          {"device_total_bytes", d.device_total ? json(d.device_total) : json()},
          {"reserved_peak_bytes", torch_only(d.reserved_peak)},
          {"allocated_at_reserved_peak_bytes", torch_only(d.allocated_at_reserved_peak)},
          {"max_reserved_minus_allocated_bytes", torch_only(d.max_reserved_minus_allocated)},
          {"reserved_end_bytes", torch_only(d.reserved_end)},
          {"allocated_end_bytes", torch_only(d.allocated_end)},
          {"blocks_at", d.torch ? json(d.snapshot) : json()},
          {"inactive_split_blocks", torch_only(d.inactive_split_blocks)},
          {"inactive_split_bytes", torch_only(d.inactive_split_bytes)},
          {"largest_free_block_bytes", torch_only(d.largest_free_block)},
          {"untracked_bytes", d.has_untracked ? json(d.untracked) : json()},
          {"limit_bytes", d.limit_bytes ? json(d.limit_bytes) : json()},
          {"memory_fraction", d.memory_fraction > 0 ? json(d.memory_fraction) : json()},
          {"ooms", std::move(ooms)}};
}

// The trace's integrity, with the events its reader replayed late (TraceStats).
json integrity_json(const Integrity& i, const TraceStats& s) {
  return {{"status", i.name},
          {"clean", i.clean},
          {"checked", i.checked},
          {"ended", i.ended},
          {"detail", i.detail},
          {"write_error", i.write_error},
          {"write_error_text", i.write_error_text},
          {"blocks", i.blocks},
          {"damaged_blocks", i.damaged_blocks},
          {"missing_blocks", i.missing_blocks},
          {"skipped_bytes", i.skipped_bytes},
          {"records_lost", i.records_lost},
          {"records_lost_exact", i.records_lost_exact},
          {"first_problem_offset", i.first_problem_offset},
          {"truncated", i.truncated},
          {"late_events", s.late_events},
          {"max_lateness_ms", static_cast<double>(s.max_lateness_ns) / 1e6}};
}

json verdict_json(const Report& report) {
  const Verdict& v = report.integrity;
  json duplicates = json::array();
  for (const Duplicate& d : report.duplicates)
    duplicates.push_back({{"trace", d.trace}, {"same_as", d.same_as}, {"why", d.why}});
  return {{"status", v.status},
          {"trusted", v.trusted},
          {"traces", report.processes.size()},
          {"not_clean", v.not_clean},
          {"problems", v.problems},
          {"duplicates", std::move(duplicates)}};
}

json process_json(const ProcessReport& p) {
  json devices = json::array();
  for (const DeviceInfo& d : p.devices)
    devices.push_back({{"device", d.device}, {"name", d.name}, {"total_bytes", d.total_bytes}});
  json attributes = json::object();
  for (const auto& [k, v] : p.attributes) attributes[k] = v;
  json process_summary = summary_json(p.summary);
  process_summary["by_api"] = by_api_json({&p.stats});
  json o = {{"pid", p.info.pid},
          {"ppid", p.info.ppid},
          {"rank", p.info.rank},
          {"host", p.info.host},
          {"command_line", p.info.command_line},
          {"executable", p.info.executable},
          {"start_time_ns", p.info.start_wall_ns},
          {"trace", p.trace},
          {"trace_bytes", p.stats.file_bytes},
          {"format_version", fmt::format("{}.{}", p.stats.version_major, p.stats.version_minor)},
          {"events", p.stats.events()},
          {"truncated", p.truncated},
          {"clean_exit", p.clean_exit},
          {"integrity", integrity_json(p.integrity, p.stats)},
          {"no_memory_events", p.no_memory_events},
          {"duration_s", p.duration_s},
          {"summary", std::move(process_summary)},
          {"devices", std::move(devices)},
          {"attributes", std::move(attributes)}};
  o["accounting"] = accounting_json(p.accounting);
  o["libraries"] = libraries_json(p.libraries);
  o["frameworks"] = frameworks_json(p.frameworks);
  if (p.timeline) o["timeline"] = timeline_json(*p.timeline);
  if (p.categories) o["categories"] = categories_json(*p.categories);
  return o;
}

json failure_json(const Failure& f) {
  json o = {{"api", std::string(format::api_name(f.event.api))},
            {"memory", std::string(format::memory_kind_name(f.event.kind))},
            {"size", f.event.size},
            {"error", f.event.error},
            {"device", f.event.device},
            {"pid", f.pid},
            {"thread", f.event.thread_id},
            {"time_s", static_cast<double>(f.event.time_ns) / 1e9},
            {"live_device_bytes", f.event.live_device_bytes},
            {"stack", frames_to_json(f.stack)}};
  if (f.event.has_meminfo) {
    o["device_free_bytes"] = f.event.meminfo_free;
    o["device_total_bytes"] = f.event.meminfo_total;
  }
  return o;
}

json suppressions_json(const std::vector<Suppression>& used) {
  json s = json::array();
  for (const Suppression& e : used)
    s.push_back({{"kind", e.type}, {"pattern", e.pattern}, {"source", e.source}, {"leaks", e.hit_count},
                 {"bytes", e.hit_bytes}});
  return s;
}

// Every process's markers (each in time order, times relative to its own start), at most
// kMaxReportMarkers in all.
constexpr size_t kMaxReportMarkers = 10000;

json markers_json(const Report& report, bool& truncated) {
  json a = json::array();
  truncated = false;
  for (const ProcessReport& p : report.processes) {
    if (p.markers_dropped) truncated = true;
    for (const MarkerEvent& m : p.markers) {
      if (a.size() == kMaxReportMarkers) {
        truncated = true;
        return a;
      }
      a.push_back({{"time_s", static_cast<double>(m.time_ns) / 1e9},
                   {"kind", std::string(format::marker_kind_name(m.kind))},
                   {"name", m.name},
                   {"pid", p.info.pid},
                   {"thread", m.thread_id}});
    }
  }
  return a;
}

}  // namespace

json report_json(const Report& report) {
  json processes = json::array();
  json failures = json::array();
  json address_space = json::array();
  json per_device = json::array();
  json recommendations = json::array();
  for (const ProcessReport& p : report.processes) {
    processes.push_back(process_json(p));
    for (const Failure& f : p.failures) failures.push_back(failure_json(f));
    for (const SiteGroup& g : p.address_space) address_space.push_back(group_json(g));
    for (const DeviceFragmentation& d : p.fragmentation) per_device.push_back(fragmentation_json(d));
    for (const Advice& a : p.advice)
      recommendations.push_back({{"id", a.id}, {"title", a.title}, {"action", a.action},
                                 {"finding", a.finding}, {"evidence", a.evidence}, {"pid", p.info.pid}});
  }
  json leaks = json::array();
  for (const SiteGroup* g : all_leaks(report, /*include_suppressed=*/true)) leaks.push_back(group_json(*g));
  json growth = json::array();
  for (const Growth* g : all_growth(report)) growth.push_back(growth_json(*g));
  json summary = summary_json(report.summary);
  std::vector<const TraceStats*> all_stats;
  for (const ProcessReport& p : report.processes) all_stats.push_back(&p.stats);
  summary["by_api"] = by_api_json(all_stats);
  // Moved in: a copy of the leaks alone is tens of thousands of frame objects.
  json out = {{"schema", kReportSchema},
              {"integrity", verdict_json(report)},
              {"notes", report_notes(report)},
              {"processes", std::move(processes)},
              {"summary", std::move(summary)},
              {"leaks", std::move(leaks)},
              {"failures", std::move(failures)},
              {"address_space", std::move(address_space)},
              {"growth", std::move(growth)},
              {"fragmentation", {{"per_device", std::move(per_device)}}},
              {"recommendations", std::move(recommendations)}};
  if (report.ranks.present()) out["ranks"] = ranks_json(report.ranks);
  bool markers_truncated = false;
  out["markers"] = markers_json(report, markers_truncated);
  if (markers_truncated) out["markers_truncated"] = true;
  if (!report.suppressions_used.empty()) out["suppressions"] = suppressions_json(report.suppressions_used);
  return out;
}

}  // namespace gpumemshim::analyzer

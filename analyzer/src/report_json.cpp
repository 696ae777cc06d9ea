#include <fmt/format.h>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

using nlohmann::json;

namespace {

json frames_json(const std::vector<Frame>& frames) {
  json a = json::array();
  for (const Frame& f : frames) {
    a.push_back({{"function", f.function}, {"file", f.file}, {"line", f.line},
                 {"module", f.module}, {"python", f.python}, {"inlined", f.inlined},
                 {"pc", fmt::format("{:#x}", f.pc)}});
  }
  return a;
}

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
          {"markers", s.markers},
          {"steps", s.steps},
          {"ranges", s.ranges},
          {"by_kind", by_kind_json(s.by_kind)},
          {"torch", {{"allocs", s.torch.allocs},
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
            {"bytes", g.bytes},
            {"count", g.count},
            {"api", g.torch_block ? std::string("torch.alloc") : std::string(format::api_name(g.api))},
            {"memory", g.torch_block ? std::string("torch_block")
                                     : std::string(format::memory_kind_name(g.memory))},
            {"device", g.device},
            {"pid", g.pid},
            {"first_time_s", static_cast<double>(g.first_time_ns) / 1e9},
            {"stack", frames_json(g.stack)}};
  if (g.suppressed) {
    o["suppressed"] = true;
    o["suppressed_by"] = g.suppressed_by;
  }
  return o;
}

json process_json(const ProcessReport& p) {
  json devices = json::array();
  for (const DeviceInfo& d : p.devices)
    devices.push_back({{"device", d.device}, {"name", d.name}, {"total_bytes", d.total_bytes}});
  json attributes = json::object();
  for (const auto& [k, v] : p.attributes) attributes[k] = v;
  json process_summary = summary_json(p.summary);
  process_summary["by_api"] = by_api_json({&p.stats});
  return {{"pid", p.info.pid},
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
          {"duration_s", p.duration_s},
          {"summary", process_summary},
          {"devices", devices},
          {"attributes", attributes}};
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
  json leaks = json::array();
  json failures = json::array();
  json address_space = json::array();
  for (const ProcessReport& p : report.processes) {
    processes.push_back(process_json(p));
    for (const Failure& f : p.failures) {
      json o = {{"api", std::string(format::api_name(f.event.api))},
                {"memory", std::string(format::memory_kind_name(f.event.kind))},
                {"size", f.event.size},
                {"error", f.event.error},
                {"device", f.event.device},
                {"pid", f.pid},
                {"thread", f.event.thread_id},
                {"time_s", static_cast<double>(f.event.time_ns) / 1e9},
                {"live_device_bytes", f.event.live_device_bytes},
                {"stack", frames_json(f.stack)}};
      if (f.event.has_meminfo) {
        o["device_free_bytes"] = f.event.meminfo_free;
        o["device_total_bytes"] = f.event.meminfo_total;
      }
      failures.push_back(std::move(o));
    }
    for (const SiteGroup& g : p.address_space) address_space.push_back(group_json(g));
  }
  for (const SiteGroup* g : all_leaks(report, /*include_suppressed=*/true)) leaks.push_back(group_json(*g));
  json summary = summary_json(report.summary);
  std::vector<const TraceStats*> all_stats;
  for (const ProcessReport& p : report.processes) all_stats.push_back(&p.stats);
  summary["by_api"] = by_api_json(all_stats);
  json out = {{"schema", kReportSchema},
              {"processes", processes},
              {"summary", summary},
              {"leaks", leaks},
              {"failures", failures},
              {"address_space", address_space},
              {"growth", json::array()},
              {"fragmentation", json::object()},
              {"recommendations", json::array()}};
  bool markers_truncated = false;
  out["markers"] = markers_json(report, markers_truncated);
  if (markers_truncated) out["markers_truncated"] = true;
  if (!report.suppressions_used.empty()) {
    json s = json::array();
    for (const Suppression& e : report.suppressions_used)
      s.push_back({{"pattern", e.pattern}, {"source", e.source}, {"leaks", e.hit_count},
                   {"bytes", e.hit_bytes}});
    out["suppressions"] = s;
  }
  return out;
}

}  // namespace gpumemshim::analyzer

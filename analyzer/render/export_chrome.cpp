#include "gpumemshim/analyzer/render.h"

#include <algorithm>

#include <fmt/format.h>

#include "replay/load.h"
#include "gpumemshim/analyzer/units.h"
#include "report/stack_view.h"
#include "findings/timeline.h"

namespace gpumemshim::analyzer {

using nlohmann::json;

namespace {

double us(uint64_t ns) { return static_cast<double>(ns) / 1e3; }

json frame_labels(const std::vector<Frame>& frames, size_t max_frames = 8) {
  json a = json::array();
  for (size_t i = 0; i < frames.size() && i < max_frames; ++i)
    a.push_back(frame_label(std::vector<Frame>{frames[i]}));
  return a;
}

void add_process(json& out, const LoadedTrace& trace, const std::vector<format::TimedEvent>& events,
                 uint64_t offset_ns) {
  const uint64_t pid = trace.process.pid;
  const json pid_j = pid;
  std::string name = trace.process.rank >= 0 ? fmt::format("pid {} rank {}: {}", pid, trace.process.rank,
                                                           trace.process.command_line)
                                             : fmt::format("pid {}: {}", pid, trace.process.command_line);
  out.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid_j}, {"tid", pid_j}, {"args", {{"name", name}}}});

  // Counters from the timeline: every bucket's lowest and highest point, so the peak is exact.
  Timeline tl = build_timeline(trace);
  for (const TimelineSample& s : tl.samples) {
    double ts = us(s.time_ns + offset_ns);
    out.push_back({{"ph", "C"}, {"name", "device memory"}, {"pid", pid_j}, {"tid", pid_j}, {"ts", ts},
                   {"args", {{"live_bytes", s.live_bytes}}}});
    for (size_t i = 0; i < tl.sites.size(); ++i)
      out.push_back({{"ph", "C"}, {"name", fmt::format("site {} [{}]", tl.sites[i].label, tl.sites[i].id)},
                     {"pid", pid_j}, {"tid", pid_j}, {"ts", ts}, {"args", {{"bytes", s.sites[i]}}}});
    if (s.sites.back() || !tl.sites.empty())
      out.push_back({{"ph", "C"}, {"name", "site (other sites)"}, {"pid", pid_j}, {"tid", pid_j},
                     {"ts", ts}, {"args", {{"bytes", s.sites.back()}}}});
    if (tl.has_torch)
      out.push_back({{"ph", "C"}, {"name", "PyTorch allocator"}, {"pid", pid_j}, {"tid", pid_j}, {"ts", ts},
                     {"args", {{"reserved_bytes", s.reserved_bytes}, {"allocated_bytes", s.allocated_bytes}}}});
  }

  StackView stacks(trace);
  for (const format::TimedEvent& e : events) {
    if (const auto* m = std::get_if<format::MarkerRecord>(&e)) {
      json ev = {{"pid", pid_j}, {"tid", m->thread_id}, {"ts", us(m->time_ns + offset_ns)},
                 {"cat", std::string(format::marker_kind_name(m->kind))}};
      switch (m->kind) {
        case format::MarkerKind::kMark:
        case format::MarkerKind::kStep:
          ev["ph"] = "i";
          ev["s"] = "t";
          ev["name"] = m->name.empty() ? std::string(format::marker_kind_name(m->kind)) : std::string(m->name);
          break;
        case format::MarkerKind::kRangePush:
          ev["ph"] = "B";
          ev["name"] = m->name.empty() ? std::string("range") : std::string(m->name);
          break;
        case format::MarkerKind::kRangePop: ev["ph"] = "E"; break;
      }
      out.push_back(std::move(ev));
    } else if (const auto* f = std::get_if<format::AllocFailedRecord>(&e)) {
      out.push_back({{"ph", "i"}, {"s", "p"}, {"pid", pid_j}, {"tid", f->thread_id},
                     {"ts", us(f->time_ns + offset_ns)}, {"cat", "failure"},
                     {"name", fmt::format("{} failed: {}", format::api_name(f->api), human_bytes(f->size))},
                     {"args", {{"size", f->size}, {"error", f->error}, {"device", f->device},
                               {"stack", frame_labels(stacks.frames(f->stack_id))}}}});
    } else if (const auto* t = std::get_if<format::TorchEventRecord>(&e);
               t && t->action == format::TorchAction::kOom) {
      out.push_back({{"ph", "i"}, {"s", "p"}, {"pid", pid_j}, {"tid", t->thread_id},
                     {"ts", us(t->time_ns + offset_ns)}, {"cat", "failure"},
                     {"name", fmt::format("PyTorch OOM: {} asked", human_bytes(t->size))},
                     {"args", {{"requested_bytes", t->size}, {"device_free_bytes", t->address},
                               {"device", t->device}, {"stack", frame_labels(stacks.frames(t->stack_id))}}}});
    }
  }
}

}  // namespace

json chrome_trace(const std::vector<std::string>& paths) {
  std::vector<LoadedTrace> traces;
  uint64_t first_wall = UINT64_MAX;
  for (const std::string& path : paths) {
    traces.push_back(load_trace(path));
    first_wall = std::min(first_wall, traces.back().process.start_wall_ns);
  }
  json events = json::array();
  for (const LoadedTrace& trace : traces) {
    format::TraceReader reader = reading_trace([&] { return format::TraceReader(trace.path); });
    uint64_t offset = traces.size() > 1 ? trace.process.start_wall_ns - first_wall : 0;
    add_process(events, trace, reading_trace([&] { return reader.timed_events(); }), offset);
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"},
          {"otherData", {{"generator", "gpumemshim export --to chrome"}}}};
}

}  // namespace gpumemshim::analyzer

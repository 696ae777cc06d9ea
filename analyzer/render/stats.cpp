#include <fmt/format.h>

#include "gpumemshim/analyzer/render.h"
#include "gpumemshim/analyzer/units.h"
#include "replay/load.h"

namespace gpumemshim::analyzer {

namespace {
const char* type_name(uint8_t t) {
  switch (static_cast<format::RecordType>(t)) {
    case format::RecordType::kProcess: return "process";
    case format::RecordType::kModule: return "module";
    case format::RecordType::kStack: return "stack";
    case format::RecordType::kAlloc: return "alloc";
    case format::RecordType::kFree: return "free";
    case format::RecordType::kAllocFailed: return "alloc_failed";
    case format::RecordType::kMemInfo: return "meminfo (cudaMemGetInfo/cuMemGetInfo samples)";
    case format::RecordType::kMarker: return "marker";
    case format::RecordType::kDevice: return "device";
    case format::RecordType::kAttribute: return "attribute";
    case format::RecordType::kEnd: return "end";
    case format::RecordType::kPyCode: return "python code";
    case format::RecordType::kPyStack: return "python stack";
    case format::RecordType::kTorchEvent: return "torch event (caching allocator)";
    case format::RecordType::kStackLabel: return "stack label (grad_fn)";
    case format::RecordType::kFlush: return "flush mark";
    case format::RecordType::kProcessMemory:
      return "process memory (NVML samples)";
  }
  return nullptr;
}
}  // namespace

std::string stats_text(const std::vector<std::string>& paths) {
  std::string out;
  for (const std::string& path : paths) {
    const LoadedTrace t = load_trace(path);
    const TraceStats& s = t.stats;
    uint64_t events = s.events();
    out += fmt::format("trace {}\n", t.path);
    out += fmt::format("  format version   {}.{}\n", s.version_major, s.version_minor);
    out += fmt::format("  pid              {} ({})\n", t.process.pid, t.process.command_line);
    out += fmt::format("  file size        {} bytes ({})\n", s.file_bytes, human_bytes(s.file_bytes));
    out += fmt::format("  records          {}\n", s.records);
    out += fmt::format("  events           {}\n", events);
    out += fmt::format("  duration         {:.6f} s\n", t.duration_s());
    out += fmt::format("  bytes per event  {}\n",
                       events ? fmt::format("{:.2f}", static_cast<double>(s.file_bytes) / static_cast<double>(events))
                              : std::string("-"));
    out += fmt::format("  truncated        {}\n",
                       t.truncated ? fmt::format("yes (at byte {})", t.truncated_at) : std::string("no"));
    out += fmt::format("  clean exit       {}\n", t.clean_exit ? "yes" : "no (no End record)");
    const Integrity integrity = integrity_of(t.integrity, t.version);
    out += fmt::format("  integrity        {}\n", integrity.clean ? integrity.name : integrity.detail);
    if (!integrity.write_error_text.empty())
      out += fmt::format("  write error      {} (errno {})\n", integrity.write_error_text, integrity.write_error);
    out += fmt::format("  order window     {} events (the most held at once to replay in time order)\n",
                       s.max_order_window);
    out += fmt::format("  read             {}\n",
                       s.buffered_read ? fmt::format("fully buffered ({})", s.buffered_because)
                                       : std::string("streamed"));
    if (s.late_events)
      out += fmt::format("  late events      {} (up to {:.1f} ms late: replayed where they were read)\n",
                         s.late_events, static_cast<double>(s.max_lateness_ns) / 1e6);
    out += fmt::format("  stacks           {} unique\n", t.stacks.size());
    out += fmt::format("  modules          {}\n", t.modules.size());
    out += "  records by type:\n";
    for (size_t i = 0; i < s.by_type.size(); ++i) {
      if (!s.by_type[i]) continue;
      const char* name = type_name(static_cast<uint8_t>(i));
      out += name ? fmt::format("    {:<48} {}\n", name, s.by_type[i])
                  : fmt::format("    {:<48} {}\n", fmt::format("unknown type {} (skipped)", i), s.by_type[i]);
    }
    out += fmt::format("  {:<28} {:>10} {:>10} {:>10} {:>16}\n", "by api:", "allocs", "frees", "failed",
                       "bytes allocated");
    for (uint8_t a = 0; a < format::kApiCount; ++a) {
      if (!s.allocs_by_api[a] && !s.frees_by_api[a] && !s.failed_by_api[a]) continue;
      out += fmt::format("    {:<26} {:>10} {:>10} {:>10} {:>16}\n", format::api_name(static_cast<Api>(a)),
                         s.allocs_by_api[a], s.frees_by_api[a], s.failed_by_api[a], s.bytes_by_api[a]);
    }
    uint64_t meminfo = s.by_type[static_cast<uint8_t>(format::RecordType::kMemInfo)];
    if (meminfo) out += fmt::format("    {:<26} {:>10} samples\n", "cudaMemGetInfo/cuMemGetInfo", meminfo);
    if (s.unknown_api) out += fmt::format("    (events with an unknown api: {})\n", s.unknown_api);
    out += "\n";
  }
  return out;
}

}  // namespace gpumemshim::analyzer

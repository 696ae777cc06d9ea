#include "render/ci_findings.h"

#include <cctype>

#include <fmt/format.h>

#include "gpumemshim/analyzer/units.h"
#include "render/sites.h"

namespace gpumemshim::analyzer {

namespace {

template <typename Source>
void mark_suppressed(Finding& f, const Source& s) {
  f.suppressed = s.suppressed;
  f.suppressed_by = s.suppressed_by;
}

Finding leak_finding(const SiteGroup& g, const FailPolicy& policy) {
  Finding f;
  f.rule = g.kind;
  f.id = g.id;
  f.bytes = g.bytes;
  f.stack = g.stack;
  mark_suppressed(f, g);
  std::string where = site_label(f.stack);
  std::string api = api_label(g.torch_block, g.api);
  const char* what = f.rule == "leak"      ? "leaked"
                     : f.rule == "cached"  ? "held by a cache"
                     : f.rule == "library" ? "kept by a library for itself (not a leak)"
                     : f.rule == "alive"
                         ? "alive when the trace ended (not a leak: the process did not exit)"
                         : "alive at exit";
  f.title = fmt::format("{}: {} in {} at {}", f.rule, human_bytes(f.bytes), plural(g.count, "allocation"), where);
  f.message = fmt::format("{} bytes ({}) {} in {} by {} at {}.", f.bytes, human_bytes(f.bytes), what,
                          plural(g.count, "allocation"), api.empty() ? "an allocation" : api, where);
  if (const std::string& reason = g.reason; !reason.empty())
    f.message += fmt::format(" {}{}.", char(std::toupper(static_cast<unsigned char>(reason[0]))), reason.substr(1));
  if (f.suppressed) f.message += fmt::format(" Suppressed by '{}'.", f.suppressed_by);
  f.fails = f.rule == "leak" && !f.suppressed && policy.leaks_over_limit;
  return f;
}

Finding growth_finding(const Growth& g, const FailPolicy& policy) {
  Finding f;
  f.rule = "growth";
  f.id = g.id;
  // The whole bytes per step, as the JSON report states the rate.
  const double per_step = static_cast<double>(static_cast<uint64_t>(g.bytes_per_step));
  f.bytes = per_step > 0 ? static_cast<uint64_t>(per_step) : 0;
  f.stack = g.stack;
  mark_suppressed(f, g);
  std::string where = site_label(f.stack);
  const bool steps = g.basis == "steps";
  f.title = fmt::format("growth: {} per {} at {}", human_bytes(f.bytes), g.unit, where);
  f.message = fmt::format(
      "Live memory at {} grows by {} bytes ({}) per {} over {}, from {} to {} bytes", where,
      f.bytes, human_bytes(f.bytes), g.unit, plural(g.steps, steps ? "step" : "window"),
      g.first_live_bytes, g.last_live_bytes);
  f.message += fmt::format(" (confidence {:.2f}).", g.confidence);
  if (g.has_projection)
    f.message += fmt::format(" The device runs out of memory at {} {} at this rate.",
                             steps ? "step" : "window", static_cast<int64_t>(g.projected_oom_step));
  if (f.suppressed) f.message += fmt::format(" Suppressed by '{}'.", f.suppressed_by);
  f.fails = !f.suppressed && policy.max_growth_bytes_per_step && per_step > *policy.max_growth_bytes_per_step;
  return f;
}

// An OOM that the cache's free bytes would have held, had one block been large enough.
Finding fragmentation_finding(const DeviceFragmentation& d, const OomFinding& o) {
  Finding f;
  f.rule = "fragmentation";
  f.id = fmt::format("{}:{}", d.pid, d.device);
  f.bytes = o.requested;
  f.title =
      fmt::format("fragmentation: OOM for {} with enough free memory in the cache on device {}",
                  human_bytes(f.bytes), d.device);
  f.message = fmt::format(
      "Process {} ran out of memory on device {} at {:.3f} s asking for {} bytes ({}) while {} "
      "bytes "
      "were free on the device; the largest free block was {} bytes; reserved {} bytes, allocated "
      "{} bytes: "
      "{}.",
      d.pid, d.device, static_cast<double>(o.time_ns) / 1e9, f.bytes, human_bytes(f.bytes),
      o.has_device_free ? o.device_free : 0, o.torch ? o.largest_free_block : 0,
      o.torch ? o.reserved : 0, o.torch ? o.allocated : 0, o.verdict);
  return f;
}

Finding failure_finding(const Failure& fl, size_t index) {
  Finding f;
  f.rule = "oom";
  f.id = fmt::format("{}:{}", fl.pid, index);
  f.bytes = fl.event.size;
  f.stack = fl.stack;
  std::string api(format::api_name(fl.event.api));
  std::string where = site_label(f.stack);
  f.title = fmt::format("oom: {} of {} failed at {}", api, human_bytes(f.bytes), where);
  f.message = fmt::format("{} of {} bytes ({}) failed with error {} at {} while {} bytes were live",
                          api, f.bytes, human_bytes(f.bytes), fl.event.error, where, fl.event.live_device_bytes);
  if (fl.event.has_meminfo)
    f.message += fmt::format(" (device free {} of {} bytes)", fl.event.meminfo_free, fl.event.meminfo_total);
  f.message += ".";
  return f;
}

Finding unreleased_finding(const SiteGroup& g) {
  Finding f = leak_finding(g, FailPolicy{});
  f.rule = "unreleased";
  f.fails = false;
  f.title = fmt::format("unreleased: {} of address space at {}", human_bytes(f.bytes), site_label(f.stack));
  return f;
}

// Advice goes with the finding it names ("leak:<id>", "growth:<id>", "fragmentation:<pid>:<dev>").
void attach_advice(const Report& report, std::vector<Finding>& findings) {
  for (const ProcessReport& p : report.processes)
    for (const Advice& a : p.advice) {
      std::string text = a.title;
      if (!a.action.empty()) text += (text.empty() ? "" : ": ") + a.action;
      text += fmt::format(" (evidence: {})", a.evidence);
      for (Finding& f : findings) {
        std::string rule =
            f.rule == "cached" || f.rule == "retained" || f.rule == "alive" || f.rule == "library"
                ? std::string("leak")
                : f.rule;
        if (a.finding == rule + ":" + f.id || a.finding == f.rule + ":" + f.id) f.advice.push_back(text);
      }
    }
}

}  // namespace

std::vector<Finding> ci_findings(const Report& report, const FailPolicy& policy) {
  std::vector<Finding> out;
  for (const SiteGroup* g : all_leaks(report, /*include_suppressed=*/true)) out.push_back(leak_finding(*g, policy));
  for (const Growth* g : all_growth(report)) out.push_back(growth_finding(*g, policy));
  for (const ProcessReport& p : report.processes)
    for (const DeviceFragmentation& d : p.fragmentation)
      for (const OomFinding& o : d.ooms)
        if (o.cause == "fragmentation") out.push_back(fragmentation_finding(d, o));
  size_t index = 0;
  for (const ProcessReport& p : report.processes)
    for (const Failure& fl : p.failures) out.push_back(failure_finding(fl, index++));
  for (const ProcessReport& p : report.processes)
    for (const SiteGroup& g : p.address_space) out.push_back(unreleased_finding(g));
  attach_advice(report, out);
  return out;
}

}  // namespace gpumemshim::analyzer

#include "render/ci_findings.h"

#include <cctype>

#include <fmt/format.h>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

using nlohmann::json;

namespace {

// Reads a key that a report written before that key existed may lack.
template <typename T>
T get(const json& o, const char* key, T fallback) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

const json& array_or_empty(const json& o, const char* key) {
  static const json kEmpty = json::array();
  auto it = o.find(key);
  return it != o.end() && it->is_array() ? *it : kEmpty;
}

std::string plural(uint64_t n, const char* word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

void mark_suppressed(Finding& f, const json& o) {
  f.suppressed = get<bool>(o, "suppressed", false);
  f.suppressed_by = get<std::string>(o, "suppressed_by", "");
}

Finding leak_finding(const json& l, const FailPolicy& policy) {
  Finding f;
  f.rule = get<std::string>(l, "kind", "leak");
  f.id = get<std::string>(l, "id", "");
  f.bytes = get<uint64_t>(l, "bytes", 0);
  f.stack = l.value("stack", json::array());
  mark_suppressed(f, l);
  uint64_t count = get<uint64_t>(l, "count", 0);
  std::string where = site_label(f.stack);
  std::string api = get<std::string>(l, "api", "");
  const char* what = f.rule == "leak" ? "leaked" : f.rule == "cached" ? "held by a cache" : "alive at exit";
  f.title = fmt::format("{}: {} in {} at {}", f.rule, human_bytes(f.bytes), plural(count, "allocation"), where);
  f.message = fmt::format("{} bytes ({}) {} in {} by {} at {}.", f.bytes, human_bytes(f.bytes), what,
                          plural(count, "allocation"), api.empty() ? "an allocation" : api, where);
  if (std::string reason = get<std::string>(l, "reason", ""); !reason.empty())
    f.message += fmt::format(" {}{}.", char(std::toupper(static_cast<unsigned char>(reason[0]))), reason.substr(1));
  if (f.suppressed) f.message += fmt::format(" Suppressed by '{}'.", f.suppressed_by);
  f.fails = f.rule == "leak" && !f.suppressed && policy.leaks_over_limit;
  return f;
}

Finding growth_finding(const json& g, const FailPolicy& policy) {
  Finding f;
  f.rule = "growth";
  f.id = get<std::string>(g, "id", "");
  double per_step = get<double>(g, "bytes_per_step", 0.0);
  f.bytes = per_step > 0 ? static_cast<uint64_t>(per_step) : 0;
  f.stack = g.value("stack", json::array());
  mark_suppressed(f, g);
  uint64_t steps = get<uint64_t>(g, "steps", 0);
  std::string where = site_label(f.stack);
  f.title = fmt::format("growth: {} per step at {}", human_bytes(f.bytes), where);
  f.message = fmt::format("Live memory at {} grows by {} bytes ({}) per step over {}, from {} to {} bytes",
                          where, f.bytes, human_bytes(f.bytes), plural(steps, "step"),
                          get<uint64_t>(g, "first_live_bytes", 0), get<uint64_t>(g, "last_live_bytes", 0));
  if (auto it = g.find("confidence"); it != g.end() && it->is_number())
    f.message += fmt::format(" (confidence {:.2f})", it->get<double>());
  f.message += ".";
  if (auto it = g.find("projected_oom_step"); it != g.end() && it->is_number())
    f.message += fmt::format(" The device runs out of memory at step {} at this rate.", it->get<int64_t>());
  if (f.suppressed) f.message += fmt::format(" Suppressed by '{}'.", f.suppressed_by);
  f.fails = !f.suppressed && policy.max_growth_bytes_per_step && per_step > *policy.max_growth_bytes_per_step;
  return f;
}

// An OOM on a device whose total free memory would have held the request: fragmentation.
std::vector<Finding> fragmentation_findings(const json& fragmentation) {
  std::vector<Finding> out;
  if (!fragmentation.is_object()) return out;
  for (const json& d : array_or_empty(fragmentation, "per_device")) {
    uint64_t pid = get<uint64_t>(d, "pid", 0);
    int64_t device = get<int64_t>(d, "device", 0);
    for (const json& o : array_or_empty(d, "ooms")) {
      if (!get<bool>(o, "enough_total_free", false)) continue;
      Finding f;
      f.rule = "fragmentation";
      f.id = fmt::format("{}:{}", pid, device);
      f.bytes = get<uint64_t>(o, "requested_bytes", 0);
      f.title = fmt::format("fragmentation: OOM for {} with enough total free memory on device {}",
                            human_bytes(f.bytes), device);
      f.message = fmt::format(
          "Process {} ran out of memory on device {} at {:.3f} s asking for {} bytes ({}) while {} bytes "
          "were free on the device; the largest free block was {} bytes; reserved {} bytes, allocated {} bytes.",
          pid, device, get<double>(o, "time_s", 0.0), f.bytes, human_bytes(f.bytes),
          get<uint64_t>(o, "device_free_bytes", 0), get<uint64_t>(o, "largest_free_block_bytes", 0),
          get<uint64_t>(o, "reserved_bytes", 0), get<uint64_t>(o, "allocated_bytes", 0));
      out.push_back(std::move(f));
    }
  }
  return out;
}

Finding failure_finding(const json& fl, size_t index) {
  Finding f;
  f.rule = "oom";
  f.id = fmt::format("{}:{}", get<uint64_t>(fl, "pid", 0), index);
  f.bytes = get<uint64_t>(fl, "size", 0);
  f.stack = fl.value("stack", json::array());
  std::string api = get<std::string>(fl, "api", "allocation");
  std::string where = site_label(f.stack);
  f.title = fmt::format("oom: {} of {} failed at {}", api, human_bytes(f.bytes), where);
  f.message = fmt::format("{} of {} bytes ({}) failed with error {} at {} while {} bytes were live",
                          api, f.bytes, human_bytes(f.bytes), get<uint64_t>(fl, "error", 0), where,
                          get<uint64_t>(fl, "live_device_bytes", 0));
  if (fl.contains("device_free_bytes"))
    f.message += fmt::format(" (device free {} of {} bytes)", get<uint64_t>(fl, "device_free_bytes", 0),
                             get<uint64_t>(fl, "device_total_bytes", 0));
  f.message += ".";
  return f;
}

Finding unreleased_finding(const json& a) {
  Finding f = leak_finding(a, FailPolicy{});
  f.rule = "unreleased";
  f.fails = false;
  f.title = fmt::format("unreleased: {} of address space at {}", human_bytes(f.bytes), site_label(f.stack));
  return f;
}

}  // namespace

const json* user_frame(const json& stack) {
  if (!stack.is_array()) return nullptr;
  for (const json& fr : stack)
    if (!get<std::string>(fr, "file", "").empty() && get<uint64_t>(fr, "line", 0) > 0) return &fr;
  return nullptr;
}

std::string site_label(const json& stack) {
  if (const json* fr = user_frame(stack))
    return fmt::format("{}:{}", get<std::string>(*fr, "file", ""), get<uint64_t>(*fr, "line", 0));
  if (stack.is_array() && !stack.empty()) {
    std::string fn = get<std::string>(stack[0], "function", "");
    if (!fn.empty()) return fn;
    std::string module = get<std::string>(stack[0], "module", "");
    if (!module.empty()) return fmt::format("{}+{}", module, get<std::string>(stack[0], "pc", "?"));
  }
  return "unknown site";
}

std::string stack_text(const json& stack) {
  std::string out;
  if (!stack.is_array()) return out;
  size_t i = 0;
  for (const json& fr : stack) {
    std::string fn = get<std::string>(fr, "function", "");
    std::string file = get<std::string>(fr, "file", "");
    std::string module = get<std::string>(fr, "module", "");
    out += fmt::format("    #{} {}", i++, fn.empty() ? get<std::string>(fr, "pc", "??") : fn);
    if (!file.empty()) out += fmt::format(" {}:{}", file, get<uint64_t>(fr, "line", 0));
    if (!module.empty()) out += fmt::format(" ({})", module);
    out += "\n";
  }
  return out;
}

std::vector<Finding> ci_findings(const json& report, const FailPolicy& policy) {
  std::vector<Finding> out;
  for (const json& l : array_or_empty(report, "leaks")) out.push_back(leak_finding(l, policy));
  for (const json& g : array_or_empty(report, "growth")) out.push_back(growth_finding(g, policy));
  if (auto it = report.find("fragmentation"); it != report.end())
    for (Finding& f : fragmentation_findings(*it)) out.push_back(std::move(f));
  size_t index = 0;
  for (const json& fl : array_or_empty(report, "failures")) out.push_back(failure_finding(fl, index++));
  for (const json& a : array_or_empty(report, "address_space")) out.push_back(unreleased_finding(a));
  // Advice goes with the finding it names ("leak:<id>", "growth:<id>", "fragmentation:<pid>:<dev>").
  for (const json& r : array_or_empty(report, "recommendations")) {
    std::string target = get<std::string>(r, "finding", "");
    std::string text = get<std::string>(r, "title", "");
    std::string action = get<std::string>(r, "action", "");
    if (!action.empty()) text += (text.empty() ? "" : ": ") + action;
    if (auto ev = r.find("evidence"); ev != r.end() && !ev->is_null())  // a sentence or the numbers
      text += fmt::format(" (evidence: {})", ev->is_string() ? ev->get<std::string>() : ev->dump());
    for (Finding& f : out) {
      std::string rule = f.rule == "cached" || f.rule == "retained" ? std::string("leak") : f.rule;
      if (target == rule + ":" + f.id || target == f.rule + ":" + f.id) f.advice.push_back(text);
    }
  }
  return out;
}

}  // namespace gpumemshim::analyzer

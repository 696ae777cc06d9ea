#include "render/report_sarif.h"

#include <array>

#include <fmt/format.h>

namespace gpumemshim::analyzer {

using nlohmann::json;

namespace {

struct Rule {
  const char* kind;
  const char* name;
  const char* description;
};

// Every finding kind (DESIGN.md §8) has a rule, used or not, so rule indices stay stable.
constexpr std::array<Rule, 7> kRules{{
    {"leak", "GpuMemoryLeak", "GPU memory allocated and never freed (a leak per DESIGN.md §8)."},
    {"cached", "CachedGpuMemory", "GPU memory held by a caching allocator's cache at exit: not a leak."},
    {"retained", "RetainedGpuMemory",
     "GPU memory allocated before the first step and alive at exit (weights, optimizer state): not a leak."},
    {"growth", "GpuMemoryGrowth", "Live GPU memory at a call site grows step over step."},
    {"fragmentation", "GpuMemoryFragmentation",
     "An allocation ran out of memory while the device had enough free memory in total."},
    {"oom", "GpuAllocationFailed", "A GPU memory allocation failed."},
    {"unreleased", "UnreleasedAddressSpace", "A virtual address reservation or mapping was never released."},
}};

size_t rule_index(const std::string& kind) {
  for (size_t i = 0; i < kRules.size(); ++i)
    if (kind == kRules[i].kind) return i;
  return 0;
}

std::string level(const Finding& f) {
  if (f.fails) return "error";
  if (f.suppressed || f.rule == "cached" || f.rule == "retained" || f.rule == "unreleased") return "note";
  return "warning";
}

// A stack frame as a SARIF location: a physical location when the frame has a file, and always a
// logical one (the function) and a message naming the frame.
json frame_location(const json& frame) {
  json loc = json::object();
  std::string file = frame.value("file", std::string());
  uint64_t line = frame.value("line", uint64_t{0});
  if (!file.empty()) {
    json region = json::object();
    if (line > 0) region["startLine"] = line;
    loc["physicalLocation"] = {{"artifactLocation", {{"uri", file_uri(file)}}}};
    if (!region.empty()) loc["physicalLocation"]["region"] = region;
  }
  std::string fn = frame.value("function", std::string());
  if (!fn.empty()) loc["logicalLocations"] = json::array({{{"fullyQualifiedName", fn}, {"kind", "function"}}});
  std::string text = fn.empty() ? frame.value("pc", std::string("??")) : fn;
  std::string module = frame.value("module", std::string());
  if (!module.empty()) text += " (" + module + ")";
  loc["message"] = {{"text", text}};
  return loc;
}

json result(const Finding& f) {
  std::string text = f.message;
  for (const std::string& a : f.advice) text += " Advice: " + a;
  json r = {{"ruleId", std::string("gpumemshim/") + f.rule},
            {"ruleIndex", rule_index(f.rule)},
            {"level", level(f)},
            {"message", {{"text", text}}},
            {"properties", {{"bytes", f.bytes}, {"kind", f.rule}, {"title", f.title}}}};
  if (!f.id.empty()) r["partialFingerprints"] = {{"gpumemshimSite/v1", f.rule + ":" + f.id}};
  // locations[0]: the innermost user frame; without one, the innermost frame (or none at all).
  const json* top = user_frame(f.stack);
  if (!top && f.stack.is_array() && !f.stack.empty()) top = &f.stack[0];
  r["locations"] = top ? json::array({frame_location(*top)}) : json::array();
  if (f.stack.is_array() && !f.stack.empty()) {
    json steps = json::array();
    for (const json& frame : f.stack) steps.push_back({{"location", frame_location(frame)}});
    r["codeFlows"] = json::array(
        {{{"message", {{"text", "allocation stack, innermost frame first"}}},
          {"threadFlows", json::array({{{"locations", steps}}})}}});
  }
  if (f.suppressed)
    r["suppressions"] = json::array({{{"kind", "external"}, {"justification", "gpumemshim suppression '" + f.suppressed_by + "'"}}});
  return r;
}

}  // namespace

std::string file_uri(const std::string& path) {
  std::string out = path.starts_with("/") ? "file://" : "";
  for (unsigned char c : path) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '/' || c == '-' || c == '_' || c == '.' || c == '~';
    out += plain ? std::string(1, static_cast<char>(c)) : fmt::format("%{:02X}", c);
  }
  return out;
}

json report_sarif(const json& report, const FailPolicy& policy) {
  json rules = json::array();
  for (const Rule& rule : kRules)
    rules.push_back({{"id", std::string("gpumemshim/") + rule.kind},
                     {"name", rule.name},
                     {"shortDescription", {{"text", rule.description}}},
                     {"defaultConfiguration", {{"level", std::string(rule.kind) == "leak" ? "error" : "warning"}}}});
  json results = json::array();
  for (const Finding& f : ci_findings(report, policy)) results.push_back(result(f));
  json artifacts = json::array();
  for (const json& p : report.value("processes", json::array()))
    artifacts.push_back({{"location", {{"uri", file_uri(p.value("trace", std::string()))}}},
                         {"description", {{"text", "gpumemshim trace of pid " + std::to_string(p.value("pid", uint64_t{0}))}}}});
  json run = {{"tool", {{"driver", {{"name", "gpumemshim"},
                                    {"version", GPUMEMSHIM_VERSION_STRING},
                                    {"rules", rules}}}}},
              {"results", results},
              {"artifacts", artifacts},
              {"columnKind", "unicodeCodePoints"}};
  return {{"version", "2.1.0"}, {"$schema", kSarifSchema}, {"runs", json::array({run})}};
}

}  // namespace gpumemshim::analyzer

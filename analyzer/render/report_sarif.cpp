// `check --sarif FILE`: GitHub code scanning and other static-analysis viewers read SARIF 2.1.0.
#include <array>

#include <fmt/format.h>

#include "gpumemshim/analyzer/render.h"
#include "render/ci_findings.h"
#include "render/escape.h"
#include "render/sites.h"

namespace gpumemshim::analyzer {

using nlohmann::json;

namespace {

constexpr const char* kSarifSchema = "https://json.schemastore.org/sarif-2.1.0.json";

struct Rule {
  const char* kind;
  const char* name;
  const char* description;
};

// Every finding kind has a rule, used or not, so rule indices stay stable.
constexpr std::array<Rule, 9> kRules{{
    {"leak", "GpuMemoryLeak",
     "GPU memory alive at exit that no cache holds and that was not made before the first step: a "
     "leak."},
    {"cached", "CachedGpuMemory",
     "GPU memory held by a caching allocator's cache at exit: not a leak."},
    {"retained", "RetainedGpuMemory",
     "GPU memory allocated before the first step and alive at exit (weights, optimizer state): not "
     "a leak."},
    {"growth", "GpuMemoryGrowth", "Live GPU memory at a call site grows step over step."},
    {"fragmentation", "GpuMemoryFragmentation",
     "An allocation ran out of memory while the device had enough free memory in total."},
    {"oom", "GpuAllocationFailed", "A GPU memory allocation failed."},
    {"unreleased", "UnreleasedAddressSpace",
     "A virtual address reservation or mapping was never released."},
    {"alive", "GpuMemoryAliveAtTraceEnd",
     "GPU memory alive when a trace without an End record stopped (the process was killed or "
     "crashed): "
     "not known to leak."},
    {"library", "LibraryGpuMemory",
     "GPU memory a library made for itself (a cuBLAS or cuDNN handle, PyTorch's cuBLAS workspace, "
     "NCCL's "
     "communicator buffers) and keeps for the life of the process: not a leak."},
}};

size_t rule_index(const std::string& kind) {
  for (size_t i = 0; i < kRules.size(); ++i)
    if (kind == kRules[i].kind) return i;
  return 0;
}

std::string level(const Finding& f) {
  if (f.fails) return "error";
  if (f.suppressed || f.rule == "cached" || f.rule == "retained" || f.rule == "unreleased" ||
      f.rule == "alive" || f.rule == "library")
    return "note";
  return "warning";
}

// A stack frame as a SARIF location: a physical location when the frame has a file, and always a
// logical one (the function) and a message naming the frame.
json frame_location(const Frame& frame) {
  json loc = json::object();
  if (!frame.file.empty()) {
    json region = json::object();
    if (frame.line > 0) region["startLine"] = frame.line;
    loc["physicalLocation"] = {{"artifactLocation", {{"uri", file_uri(frame.file)}}}};
    if (!region.empty()) loc["physicalLocation"]["region"] = region;
  }
  if (!frame.function.empty())
    loc["logicalLocations"] = json::array({{{"fullyQualifiedName", frame.function}, {"kind", "function"}}});
  std::string text = function_or_pc(frame);
  if (!frame.module.empty()) text += " (" + frame.module + ")";
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
  const Frame* top = user_frame(f.stack);
  if (!top && !f.stack.empty()) top = &f.stack[0];
  r["locations"] = top ? json::array({frame_location(*top)}) : json::array();
  if (!f.stack.empty()) {
    json steps = json::array();
    for (const Frame& frame : f.stack) steps.push_back({{"location", frame_location(frame)}});
    r["codeFlows"] = json::array(
        {{{"message", {{"text", "allocation stack, innermost frame first"}}},
          {"threadFlows", json::array({{{"locations", steps}}})}}});
  }
  if (f.suppressed)
    r["suppressions"] = json::array({{{"kind", "external"}, {"justification", "gpumemshim suppression '" + f.suppressed_by + "'"}}});
  return r;
}

// Whether the run's input could be trusted: an error per trace that is not clean (its findings are
// not the whole story), a note for each of the report's notes.
json invocation(const Report& report) {
  json notifications = json::array();
  for (const ProcessReport& p : report.processes) {
    if (p.integrity.clean) continue;
    std::string text = "trace " + p.trace + ": " + p.integrity.detail;
    if (!p.integrity.write_error_text.empty()) text += " (the shim's write failed: " + p.integrity.write_error_text + ")";
    notifications.push_back({{"level", "error"},
                             {"message", {{"text", text}}},
                             {"descriptor", {{"id", "gpumemshim/integrity"}}},
                             {"locations", json::array({{{"physicalLocation",
                                                          {{"artifactLocation", {{"uri", file_uri(p.trace)}}}}}}})},
                             {"properties", {{"integrity", p.integrity.name}}}});
  }
  for (const std::string& n : report_notes(report))
    notifications.push_back({{"level", "note"}, {"message", {{"text", n}}}, {"descriptor", {{"id", "gpumemshim/note"}}}});
  return {{"executionSuccessful", report.integrity.trusted},
          {"toolExecutionNotifications", std::move(notifications)},
          {"properties", {{"integrity", report.integrity.status}}}};
}

}  // namespace

json report_sarif(const Report& report, const FailPolicy& policy) {
  json rules = json::array();
  for (const Rule& rule : kRules)
    rules.push_back({{"id", std::string("gpumemshim/") + rule.kind},
                     {"name", rule.name},
                     {"shortDescription", {{"text", rule.description}}},
                     {"defaultConfiguration", {{"level", std::string(rule.kind) == "leak" ? "error" : "warning"}}}});
  json results = json::array();
  for (const Finding& f : ci_findings(report, policy)) results.push_back(result(f));
  json artifacts = json::array();
  for (const ProcessReport& p : report.processes)
    artifacts.push_back({{"location", {{"uri", file_uri(p.trace)}}},
                         {"description", {{"text", "gpumemshim trace of pid " + std::to_string(p.info.pid)}}}});
  json run = {{"tool", {{"driver", {{"name", "gpumemshim"},
                                    {"version", GPUMEMSHIM_VERSION_STRING},
                                    {"rules", rules}}}}},
              {"results", results},
              {"invocations", json::array({invocation(report)})},
              {"artifacts", artifacts},
              {"columnKind", "unicodeCodePoints"}};
  return {{"version", "2.1.0"}, {"$schema", kSarifSchema}, {"runs", json::array({run})}};
}

}  // namespace gpumemshim::analyzer

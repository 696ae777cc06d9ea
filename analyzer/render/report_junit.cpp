// `check --junit FILE`: the Surefire/Jenkins dialect CI servers read.
#include <algorithm>

#include <fmt/format.h>

#include "gpumemshim/analyzer/render.h"
#include "render/ci_findings.h"
#include "render/escape.h"
#include "render/sites.h"

namespace gpumemshim::analyzer {

namespace {

std::string attr(const char* name, const std::string& value) {
  return fmt::format(" {}=\"{}\"", name, xml_escape(value));
}

std::string testcase(const Finding& f) {
  std::string name = f.id.empty() ? f.title : fmt::format("{} [{}]", f.title, f.id);
  std::string out = "    <testcase" + attr("name", name) + attr("classname", "gpumemshim." + f.rule) +
                    attr("time", "0");
  std::string body = f.message + "\n";
  if (!f.stack.empty()) body += "Stack:\n" + stack_text(f.stack);
  for (const std::string& a : f.advice) body += "Advice: " + a + "\n";
  if (f.fails) {
    out += ">\n      <failure" + attr("message", f.message) + attr("type", "gpumemshim." + f.rule) + ">" +
           xml_escape(body, false) + "</failure>\n    </testcase>\n";
  } else {
    // Findings that do not fail the check (cached, retained, suppressed, under a limit) still
    // show what was found.
    out += ">\n      <system-out>" + xml_escape(body, false) + "</system-out>\n    </testcase>\n";
  }
  return out;
}

// One testcase for the traces that are not clean: the findings of such a run are not the whole
// story, so CI shows it as a failure unless --allow-incomplete accepted it.
std::string integrity_testcase(const Report& report, const FailPolicy& policy, size_t& failures) {
  const Verdict& v = report.integrity;
  if (v.trusted) return {};
  std::string message = fmt::format("{} of {} cannot be trusted in full ({})", v.not_clean,
                                    plural(report.processes.size(), "trace"), v.status);
  std::string body;
  for (const std::string& p : v.problems) body += p + "\n";
  for (const ProcessReport& p : report.processes)
    if (!p.integrity.write_error_text.empty())
      body += fmt::format("{}: the shim's write failed: {}\n", p.trace, p.integrity.write_error_text);
  std::string out = "    <testcase" + attr("name", "trace integrity") + attr("classname", "gpumemshim.integrity") +
                    attr("time", "0") + ">\n";
  if (policy.allow_incomplete) {
    body += "Accepted with --allow-incomplete: the findings cover only what was recorded.\n";
    return out + "      <system-out>" + xml_escape(body, false) + "</system-out>\n    </testcase>\n";
  }
  ++failures;
  return out + "      <failure" + attr("message", message) + attr("type", "gpumemshim.integrity") + ">" +
         xml_escape(message + "\n" + body, false) + "</failure>\n    </testcase>\n";
}

}  // namespace

std::string report_junit(const Report& report, const FailPolicy& policy) {
  std::vector<Finding> findings = ci_findings(report, policy);
  size_t failures = 0;
  std::string cases;
  for (const Finding& f : findings) {
    failures += f.fails ? 1 : 0;
    cases += testcase(f);
  }
  std::string integrity = integrity_testcase(report, policy, failures);
  cases = integrity + cases;
  size_t tests = findings.size() + (integrity.empty() ? 0 : 1);
  if (failures == 0) {
    std::string name = fmt::format("gpumemshim check passed: {} bytes leaked, peak {} bytes",
                                   report.summary.leaked_bytes, report.summary.peak_bytes);
    cases += "    <testcase" + attr("name", name) + attr("classname", "gpumemshim.check") + attr("time", "0") +
             "/>\n";
    ++tests;
  }
  double duration = 0;
  std::string host, traces;
  for (const ProcessReport& p : report.processes) {
    duration = std::max(duration, p.duration_s);
    if (host.empty()) host = p.info.host;
    traces += (traces.empty() ? "" : " ") + p.trace;
  }
  std::string counts = attr("tests", std::to_string(tests)) + attr("failures", std::to_string(failures)) +
                       attr("errors", "0") + attr("skipped", "0") + attr("time", fmt::format("{:.3f}", duration));
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuites" + attr("name", "gpumemshim") + counts + ">\n";
  out += "  <testsuite" + attr("name", "gpumemshim.check") + counts +
         attr("hostname", host.empty() ? "localhost" : host) + ">\n";
  out += "    <properties>\n      <property" + attr("name", "traces") + attr("value", traces) + "/>\n" +
         "      <property" + attr("name", "schema") + attr("value", kReportSchema) +
         "/>\n      <property" + attr("name", "integrity") + attr("value", report.integrity.status) +
         "/>\n    </properties>\n";
  out += cases;
  std::string notes;
  for (const std::string& n : report_notes(report)) notes += "note: " + n + "\n";
  if (!notes.empty()) out += "    <system-out>" + xml_escape(notes, false) + "</system-out>\n";
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

}  // namespace gpumemshim::analyzer

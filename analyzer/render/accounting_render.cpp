#include "render/accounting_render.h"

#include <fmt/format.h>

#include <cstdlib>

#include "findings/accounting.h"
#include "gpumemshim/analyzer/units.h"
#include "render/escape.h"

namespace gpumemshim::analyzer {

namespace {

std::string when(const AccountingPoint& p) {
  if (p.at == "peak") return "at the peak";
  if (p.at == "oom") return "before an OOM";
  return "at the end";
}

// "CUDA context; cuBLAS, NCCL loaded; other processes".
std::string owners_text(const std::vector<std::string>& owners) {
  std::string context, libraries, others;
  for (const std::string& o : owners) {
    if (o == "CUDA context")
      context = o;
    else if (o == "other processes")
      others = o;
    else
      libraries += (libraries.empty() ? "" : ", ") + o;
  }
  std::string out = context;
  if (!libraries.empty()) out += (out.empty() ? "" : "; ") + libraries + " loaded";
  if (!others.empty()) out += (out.empty() ? "" : "; ") + others;
  return out;
}

// The rest of the view after the traced bytes: "+ 300.00 MiB not explained (CUDA context)".
std::string rest_text(const AccountingPoint& p) {
  if (p.not_explained_bytes >= 0) {
    std::string owners = owners_text(p.likely_owners);
    return fmt::format("+ {} not explained{}",
                       human_bytes(static_cast<uint64_t>(p.not_explained_bytes)),
                       owners.empty() ? "" : " (" + owners + ")");
  }
  return fmt::format("- {} the trace counts that the device does not show",
                     human_bytes(static_cast<uint64_t>(-p.not_explained_bytes)));
}

// Where a user finds the same number: nvidia-smi lists a process's memory in MiB.
std::string nvidia_smi_text(const AccountingPoint& p) {
  if (p.source == "nvml")
    return fmt::format("; nvidia-smi: {} MiB for this pid", p.device_view_bytes >> 20);
  if (p.source == "nvml_device")
    return fmt::format("; nvidia-smi: {} MiB used on the GPU", p.device_view_bytes >> 20);
  return "";
}

}  // namespace

std::string accounting_text(const std::vector<AccountingPoint>& points) {
  std::string out;
  for (const AccountingPoint& p : points)
    out += fmt::format("   device view {}, device {} ({}, {:.3f} s): {} = {} traced {}{}\n",
                       when(p), p.device, accounting_source_label(p),
                       static_cast<double>(p.time_ns) / 1e9, human_bytes(p.device_view_bytes),
                       human_bytes(p.traced_bytes), rest_text(p), nvidia_smi_text(p));
  return out;
}

nlohmann::json accounting_json(const std::vector<AccountingPoint>& points) {
  nlohmann::json a = nlohmann::json::array();
  for (const AccountingPoint& p : points)
    a.push_back({{"at", p.at},
                 {"device", p.device},
                 {"time_s", static_cast<double>(p.time_ns) / 1e9},
                 {"source", p.source},
                 {"device_wide", p.device_wide},
                 {"device_view_bytes", p.device_view_bytes},
                 {"device_total_bytes",
                  p.device_total_bytes ? nlohmann::json(p.device_total_bytes) : nlohmann::json()},
                 {"traced_bytes", p.traced_bytes},
                 {"not_explained_bytes", p.not_explained_bytes},
                 {"likely_owners", p.likely_owners}});
  return a;
}

std::string accounting_html(const std::vector<AccountingPoint>& points) {
  if (points.empty()) return {};
  auto cell = [](uint64_t b) {
    return fmt::format("<td class=\"num\" title=\"{} bytes\">{}</td>", b,
                       html_escape(human_bytes(b)));
  };
  std::string out =
      "<table><tr><th>device view</th><th>device</th><th>source</th><th>view</th><th>traced</th>"
      "<th>not explained</th><th>likely owners</th></tr>\n";
  for (const AccountingPoint& p : points) {
    const uint64_t rest = static_cast<uint64_t>(std::llabs(p.not_explained_bytes));
    out += fmt::format(
        "<tr><td>{} ({:.3f} s)</td><td>{}</td><td>{}</td>{}{}<td class=\"num\" title=\"{} "
        "bytes\">{}{}</td>"
        "<td>{}</td></tr>\n",
        html_escape(when(p)), static_cast<double>(p.time_ns) / 1e9, p.device,
        html_escape(accounting_source_label(p)), cell(p.device_view_bytes), cell(p.traced_bytes),
        p.not_explained_bytes, p.not_explained_bytes < 0 ? "\u2212" : "",
        html_escape(human_bytes(rest)), html_escape(owners_text(p.likely_owners)));
  }
  return out + "</table>\n";
}

}  // namespace gpumemshim::analyzer

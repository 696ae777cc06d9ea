#include "findings/advice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <string_view>
#include <utility>

#include "findings/activation_advice.h"
#include "findings/frameworks.h"
#include "findings/pool_advice.h"
#include "findings/retained_graph.h"
#include "gpumemshim/analyzer/units.h"
#include "report/analysis.h"

namespace gpumemshim::analyzer {

namespace {

// A growing site that adds at most this much per step, every step, is typically one scalar tensor
// kept per step with its graph (total_loss += loss).
constexpr double kSmallStepBytes = 64 * 1024;
constexpr double kEveryStepConfidence = 0.9;
// Memory made inside the step in progress that dominates the peak: activations and temporaries.
constexpr double kInStepDominates = 0.5;
// Cached memory at the end worth giving back: at least half of what is reserved, and 64 MiB.
constexpr uint64_t kLargeCache = 64ull << 20;

// The innermost frame with a source line, or null.
const Frame* first_with_line(const std::vector<Frame>& stack) {
  for (const Frame& f : stack)
    if (!f.file.empty() && f.line) return &f;
  return nullptr;
}

// What the process may use: its own cap when the trace knows one (memory_limit.h), else the
// device's capacity; 0 when unknown.
uint64_t capacity(const ProcessReport& p) {
  uint64_t limit = 0;
  for (const DeviceFragmentation& d : p.fragmentation)
    if (d.limit_bytes) limit = limit ? std::min(limit, d.limit_bytes) : d.limit_bytes;
  return limit ? limit : device_total(p);
}

bool capped(const ProcessReport& p) {
  return std::any_of(p.fragmentation.begin(), p.fragmentation.end(),
                     [](const DeviceFragmentation& d) { return d.limit_bytes != 0; });
}

std::string where(const std::vector<Frame>& stack) {
  if (const Frame* f = first_with_line(stack)) return fmt::format("{}:{}", f->file, f->line);
  for (const Frame& f : stack)
    if (!f.function.empty()) return f.function;
  return "an unknown site";
}

bool has_python(const std::vector<Frame>& stack) {
  return std::any_of(stack.begin(), stack.end(), [](const Frame& f) { return f.python; });
}

// The text of a source line when the file is readable where the analysis runs (the script usually
// is): evidence of what the line does. "" otherwise.
std::string source_line(const std::string& file, uint32_t line) {
  if (file.empty() || line == 0 || file.front() == '<') return {};
  std::ifstream in(file);
  std::string text;
  for (uint32_t n = 1; n <= line && std::getline(in, text); ++n) {
    if (n == line) {
      size_t b = text.find_first_not_of(" \t");
      size_t e = text.find_last_not_of(" \t\r");
      return b == std::string::npos ? std::string() : text.substr(b, e - b + 1).substr(0, 160);
    }
  }
  return {};
}

const Frame* first_python(const std::vector<Frame>& stack) {
  for (const Frame& f : stack)
    if (f.python) return &f;
  return nullptr;
}

// `total_loss += loss`, `running = running + criterion(...)`: a loss summed across steps as a tensor.
bool accumulates_loss(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t hash = text.find('#');
  if (hash != std::string::npos) text.resize(hash);
  if (text.find("loss") == std::string::npos) return false;
  if (text.find("+=") != std::string::npos) return true;
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  std::string lhs = text.substr(0, eq);
  lhs.erase(lhs.find_last_not_of(' ') + 1);
  return text.find(lhs + " +", eq) != std::string::npos || text.find(lhs + "+", eq) != std::string::npos;
}

// Growth: what the growing line does, when its source is at hand.
void advise_growth(const ProcessReport& p, std::vector<Advice>& out) {
  for (const Growth& g : p.growth) {
    if (g.suppressed) continue;
    std::string evidence = fmt::format(
        "live bytes at {} grow by {} bytes per {} over {} {} (confidence {:.2f}): {} -> {}{}",
        where(g.stack), static_cast<uint64_t>(g.bytes_per_step), g.unit, g.steps,
        g.basis == "steps" ? "steps" : "windows", g.confidence, human_bytes(g.first_live_bytes),
        human_bytes(g.last_live_bytes),
        !g.has_projection
            ? ""
            : fmt::format("; the device would be full at {} {}",
                          g.basis == "steps" ? "step" : "window", g.projected_oom_step));
    const Frame* py = first_python(g.stack);
    const Frame* at = py ? py : first_with_line(g.stack);
    const std::string text = at ? source_line(at->file, at->line) : std::string();
    if (!text.empty()) evidence += fmt::format("; the line reads `{}`", text);
    if (py && !text.empty() && accumulates_loss(text))
      out.push_back({"item-or-detach", "Accumulate Python numbers, not tensors",
                     "This line sums a loss across steps as a tensor, which keeps every step's autograd "
                     "graph (and the activations it saved) alive: accumulate loss.item() or "
                     "loss.detach() instead.",
                     "growth:" + g.id, evidence});
    else if (text.empty() && has_python(g.stack) && g.bytes_per_step <= kSmallStepBytes &&
             g.confidence >= kEveryStepConfidence)  // no source at hand: a small tensor every step
      out.push_back({"item-or-detach", "Accumulate Python numbers, not tensors",
                     "A small tensor made at this line survives every step, as when a loss is summed "
                     "across steps (total_loss += loss) and keeps its autograd graph alive: accumulate "
                     "loss.item() or loss.detach() instead.",
                     "growth:" + g.id, evidence});
    else
      out.push_back({"del-references", "Drop references kept across steps",
                     has_python(g.stack)
                         ? "Memory allocated at this line is still referenced steps later (a list, dict, "
                           "cache or attribute that keeps growing): delete the references when done (del), "
                           "or keep .detach().cpu() copies."
                         : "Memory allocated at this line is still held steps later: free it when its step "
                           "is done (cudaFree, or the owning object's destructor), or bound the container "
                           "that keeps it.",
                     "growth:" + g.id, evidence});
  }
}

// The first unsuppressed OOM of the allocator with this cause, or null.
const OomFinding* first_oom(const DeviceFragmentation& d, std::string_view cause) {
  for (const OomFinding& o : d.ooms)
    if (!o.suppressed && o.torch && o.cause == cause) return &o;
  return nullptr;
}

// An OOM at the process's own cap: the cap, not the device or the cache's layout, was the limit.
void advise_memory_cap(const DeviceFragmentation& d, const OomFinding& oom,
                       const std::string& finding, std::vector<Advice>& out) {
  const std::string fraction =
      oom.memory_fraction > 0 ? fmt::format("{:.3g}", oom.memory_fraction) : std::string("...");
  out.push_back(
      {"raise-memory-fraction", "Raise the process's memory cap, or need less under it",
       fmt::format("The caching allocator stopped at this process's own cap "
                   "(torch.cuda.set_per_process_memory_fraction({})), not at the device's "
                   "capacity{}: raise the fraction if the device can spare it, or make the "
                   "process need less at once (smaller batches, gradient checkpointing). "
                   "Allocator settings (expandable_segments, max_split_size_mb) do not help: "
                   "the cache had no room to rearrange.",
                   fraction,
                   oom.has_device_free
                       ? fmt::format(" (the device had {} free)", human_bytes(oom.device_free))
                       : std::string()),
       finding,
       fmt::format("OOM at {:.3f} s on device {}: {}", static_cast<double>(oom.time_ns) / 1e9,
                   d.device, oom.verdict)});
}

// Fragmentation: an OOM that the cache's free bytes would have held but no free block could (the
// measured cause, not merely free memory somewhere), an OOM at the process's own cap, or a large
// cache left at the end.
void advise_fragmentation(const ProcessReport& p, const std::string& pid, std::vector<Advice>& out) {
  for (const DeviceFragmentation& d : p.fragmentation) {
    if (!d.torch) continue;
    const std::string finding = fmt::format("fragmentation:{}:{}", pid, d.device);
    if (const OomFinding* capped_oom = first_oom(d, "memory_limit"))
      advise_memory_cap(d, *capped_oom, finding, out);
    if (const OomFinding* oom = first_oom(d, "fragmentation")) {
      std::string evidence = fmt::format(
          "OOM at {:.3f} s asking {} ({} bytes) while {} was reserved and {} allocated: {} free in "
          "the cache, largest free block {}; {} inactive split blocks ({})",
          static_cast<double>(oom->time_ns) / 1e9, human_bytes(oom->requested), oom->requested,
          human_bytes(oom->reserved), human_bytes(oom->allocated), human_bytes(oom->reserved - oom->allocated),
          human_bytes(oom->largest_free_block), d.inactive_split_blocks, human_bytes(d.inactive_split_bytes));
      out.push_back({"expandable-segments", "Let the caching allocator grow segments in place",
                     "The OOM happened with enough memory free in total, split across segments: set "
                     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True so that segments grow instead of "
                     "fragmenting.",
                     finding, evidence});
      out.push_back({"max-split-size", "Stop large blocks from being split",
                     fmt::format("Alternatively set PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:{} so "
                                 "that blocks larger than the request are not split into unusable pieces.",
                                 std::max<uint64_t>(1, oom->requested >> 20)),
                     finding, evidence});
    }
    // The cache still holds a lot at the end: other processes (or non-PyTorch code) could use it.
    if (d.reserved_end >= kLargeCache && d.reserved_end - d.allocated_end >= d.reserved_end / 2)
      out.push_back({"del-and-empty-cache", "Give the cached memory back",
                     "Most reserved memory is unused at the end: del the tensors you no longer need, then "
                     "call torch.cuda.empty_cache() so other processes and libraries can use it.",
                     finding,
                     fmt::format("at the end {} reserved by the caching allocator, {} of it allocated "
                                 "({:.0f}% unused)",
                                 human_bytes(d.reserved_end), human_bytes(d.allocated_end),
                                 pct(d.reserved_end - d.allocated_end, d.reserved_end))});
  }
}

// The peak fell after backward() returned and before optimizer.step() finished: gradients,
// optimizer state and the step's temporaries at once.
void advise_optimizer_peak(const ProcessReport& p, const std::string& pid, std::vector<Advice>& out) {
  const bool torch_peak = p.torch_peak_bytes > 0;
  const uint64_t t_peak = torch_peak ? p.torch_peak_time_ns : p.peak_time_ns;
  const uint64_t at_peak = torch_peak ? p.torch_peak_bytes : p.summary.peak_bytes;
  const MarkerEvent* before = nullptr;  // the last backward push/pop or optimizer step before
  const MarkerEvent* after = nullptr;   // ... and the first after
  for (const MarkerEvent& m : p.markers) {
    const bool backward = (m.kind == format::MarkerKind::kRangePush ||
                           m.kind == format::MarkerKind::kRangePop) && m.name == "torch.backward";
    const bool opt_step = m.kind == format::MarkerKind::kStep && m.name == "optimizer.step";
    if (!backward && !opt_step) continue;
    if (m.time_ns <= t_peak) {
      before = &m;
    } else {
      after = &m;
      break;
    }
  }
  if (at_peak && before && after && before->kind == format::MarkerKind::kRangePop &&
      after->kind == format::MarkerKind::kStep)
    out.push_back({"set-to-none", "Shrink what the optimizer step holds",
                   "The peak comes during the optimizer step, when gradients, optimizer state and the "
                   "step's temporaries are alive together: call optimizer.zero_grad(set_to_none=True), "
                   "use foreach=False (or fused=True where it is smaller), or an 8-bit optimizer "
                   "(bitsandbytes) to shrink the state.",
                   "peak:" + pid,
                   fmt::format("the {} peak ({}) was reached at {:.3f} s, after backward() returned at "
                               "{:.3f} s and before optimizer.step() finished at {:.3f} s",
                               torch_peak ? "tensor" : "device", human_bytes(at_peak),
                               static_cast<double>(t_peak) / 1e9,
                               static_cast<double>(before->time_ns) / 1e9,
                               static_cast<double>(after->time_ns) / 1e9)});
}

// A peak close to what the process may use (or an OOM that no defragmenting would have avoided).
void advise_near_capacity(const ProcessReport& p, const std::string& pid, std::vector<Advice>& out) {
  const uint64_t total = capacity(p);
  bool hard_oom = false;
  for (const DeviceFragmentation& d : p.fragmentation)
    for (const OomFinding& o : d.ooms) hard_oom |= !o.suppressed && !o.enough_total_free;
  const uint64_t peak = p.summary.peak_bytes;
  const bool near = total && static_cast<double>(peak) >= kNearCapacity * static_cast<double>(total);
  if (!near && !hard_oom) return;
  const std::string finding = "peak:" + pid;
  std::string evidence =
      total ? fmt::format("peak {} of {} {} ({:.0f}%)", human_bytes(peak), human_bytes(total),
                          capped(p) ? "under the process's memory cap" : "on the device",
                          pct(peak, total))
            : fmt::format("peak {}", human_bytes(peak));
  if (hard_oom) evidence += "; an OOM happened without enough free memory in total";
  if (p.summary.steps > 0)
    out.push_back({"gradient-accumulation", "Use smaller batches and accumulate gradients",
                   "Split each batch into micro-batches and call optimizer.step() every N of them: the "
                   "per-step memory shrinks with the micro-batch while the effective batch stays.",
                   finding, evidence});
  // Activations: what the step in progress made and still holds at the peak.
  const uint64_t in_step = p.torch_peak_bytes ? p.torch_peak_in_step_bytes : p.peak_in_step_bytes;
  const uint64_t at_peak = p.torch_peak_bytes ? p.torch_peak_bytes : peak;
  if (p.summary.steps > 0 && at_peak &&
      static_cast<double>(in_step) >= kInStepDominates * static_cast<double>(at_peak)) {
    const std::string activations =
        fmt::format("{}; {} of the {} live at the peak was allocated in the step in progress "
                    "({:.0f}%: activations and temporaries)",
                    evidence, human_bytes(in_step), human_bytes(at_peak), pct(in_step, at_peak));
    out.push_back({"gradient-checkpointing", "Recompute activations instead of keeping them",
                   "Memory made during the step dominates the peak: wrap blocks of the model in "
                   "torch.utils.checkpoint.checkpoint so their activations are recomputed in backward.",
                   finding, activations});
    out.push_back({"amp", "Keep activations in half precision",
                   "If the model runs in fp32, run its forward under torch.autocast(\"cuda\", "
                   "dtype=torch.bfloat16): activations, which dominate this peak, take half the memory "
                   "(the trace does not record dtypes: skip this if autocast is already on).",
                   finding, activations});
  }
}

}  // namespace

double pct(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

uint64_t device_total(const ProcessReport& p) {
  uint64_t total = 0;
  for (const DeviceInfo& d : p.devices) total = std::max(total, d.total_bytes);
  for (const DeviceFragmentation& d : p.fragmentation) total = std::max(total, d.device_total);
  return total;
}

std::string user_place(const std::vector<Frame>& stack) {
  for (bool python : {true, false})
    for (const Frame& f : stack)
      if (f.python == python && !f.file.empty() && f.line) return fmt::format("{}:{}", f.file, f.line);
  return stack.empty() || stack.front().function.empty() ? std::string("an unknown site") : stack.front().function;
}

std::vector<Advice> advise(const ProcessReport& p) {
  std::vector<Advice> out;
  const std::string pid = std::to_string(p.info.pid);
  advise_growth(p, out);
  advise_retained_graphs(p, out);
  advise_fragmentation(p, pid, out);
  advise_optimizer_peak(p, pid, out);
  advise_near_capacity(p, pid, out);
  advise_cupy_pool(p, capacity(p), out);
  advise_framework_modes(p, out);
  const size_t generic = out.size();
  advise_activations(p, capacity(p), out);
  if (out.size() != generic)  // the categories' figures say more than the peak's general advice
    std::erase_if(out, [](const Advice& a) {
      return a.id == "gradient-checkpointing" || a.id == "gradient-accumulation" || a.id == "amp";
    });
  return out;
}

void advise_shared_devices(Report& report) {
  // (host, device) -> the processes that used it and the device's total, when a trace knows it.
  struct Shared {
    std::vector<ProcessReport*> processes;
    uint64_t total = 0;
    uint64_t peaks = 0;
  };
  std::map<std::pair<std::string, int32_t>, Shared> by_device;
  for (ProcessReport& p : report.processes) {
    const uint64_t total = device_total(p);
    int32_t device = 0;  // the device whose capacity the trace knows (its cudaMemGetInfo samples)
    for (const DeviceFragmentation& d : p.fragmentation)
      if (d.device_total) device = d.device;
    Shared& s = by_device[{p.info.host, device}];
    s.processes.push_back(&p);
    s.total = std::max(s.total, total);
    s.peaks += p.summary.peak_bytes;
  }
  for (auto& [key, s] : by_device) {
    const size_t n = s.processes.size();
    if (n < 2 || !s.total || static_cast<double>(s.peaks) < kNearCapacity * static_cast<double>(s.total)) continue;
    std::string peaks;
    for (const ProcessReport* p : s.processes)
      peaks += fmt::format("{}pid {}{} {}", peaks.empty() ? "" : ", ", p->info.pid,
                           p->info.rank >= 0 ? fmt::format(" (rank {})", p->info.rank) : std::string(),
                           human_bytes(p->summary.peak_bytes));
    const double fraction = std::max(0.01, static_cast<double>(static_cast<int>(90.0 / static_cast<double>(n))) / 100.0);
    const std::string evidence =
        fmt::format("{} processes on host {} share device {} ({}): peaks {}; together {} ({:.0f}% of the "
                    "device)",
                    n, key.first.empty() ? "?" : key.first, key.second, human_bytes(s.total), peaks,
                    human_bytes(s.peaks), pct(s.peaks, s.total));
    for (ProcessReport* p : s.processes)
      p->advice.push_back({"memory-fraction", "Cap each process's share of the shared device",
                           fmt::format("These processes run on one device: call "
                                       "torch.cuda.set_per_process_memory_fraction({:.2f}) in each so "
                                       "that one's cache cannot starve the others into an OOM (or give "
                                       "each process its own device).",
                                       fraction),
                           fmt::format("peak:{}", p->info.pid), evidence});
  }
}

}  // namespace gpumemshim::analyzer

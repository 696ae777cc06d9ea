#include "findings/activation_advice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "findings/advice.h"
#include "gpumemshim/analyzer/report.h"
#include "gpumemshim/analyzer/units.h"

namespace gpumemshim::analyzer {

namespace {

// Activations "dominate" an OOM when they are at least this share of the device's tensor bytes and
// more than the weights, their gradients and the optimizer's state together: only then do
// checkpointing, AMP or a smaller batch address what filled the memory.
constexpr double kDominates = 0.5;
// The activation sites named: the largest few, where checkpointing pays most.
constexpr size_t kSitesNamed = 3;

// What a moment of memory pressure held: an OOM, or a peak near the process's capacity.
struct Pressure {
  int32_t device = 0;
  const CategoryBytes* at = nullptr;
  uint64_t in_pass = 0;    // of the temporaries, the stopped pass's (an OOM's only)
  uint64_t requested = 0;  // what the OOM asked for; 0 at a peak
  uint64_t limit = 0;      // the process's cap, else the device's total; 0 when unknown
  std::string finding;
  std::string moment;  // "at the OOM on device 0 (asking 32.00 MiB)", "at the peak ..."
};

struct Shares {
  uint64_t activations = 0;  // confirmed, plus the stopped pass's
  uint64_t weights = 0;      // parameters, gradients, optimizer state
  uint64_t tensors = 0;      // every tensor category
};

Shares shares(const Pressure& m) {
  const CategoryBytes& c = *m.at;
  Shares s;
  s.weights = c.of(MemoryCategory::kParameter) + c.of(MemoryCategory::kGradient) +
              c.of(MemoryCategory::kOptimizerState);
  s.activations =
      c.of(MemoryCategory::kActivation) + std::min(m.in_pass, c.of(MemoryCategory::kTemporary));
  s.tensors = s.weights + c.of(MemoryCategory::kActivation) + c.of(MemoryCategory::kTemporary);
  return s;
}

// The largest activation sites at the peak; the temporaries' when no pass ever completed (an OOM
// in the first forward pass confirms none).
std::string heaviest_sites(const MemoryCategories& m, uint64_t& bytes) {
  for (MemoryCategory category : {MemoryCategory::kActivation, MemoryCategory::kTemporary}) {
    std::vector<const CategorySite*> sites;
    for (const CategorySite& s : m.peak_sites)
      if (s.category == category) sites.push_back(&s);
    if (sites.empty()) continue;
    std::sort(sites.begin(), sites.end(), [](auto* a, auto* b) { return a->bytes > b->bytes; });
    std::string out;
    bytes = 0;
    for (size_t i = 0; i < sites.size() && i < kSitesNamed; ++i) {
      out += fmt::format("{}{} ({})", i ? ", " : "", user_place(sites[i]->stack),
                         human_bytes(sites[i]->bytes));
      bytes += sites[i]->bytes;
    }
    return out;
  }
  return {};
}

// The limit the OOM ran into: the process's cap, else the device's total; 0 when unknown.
uint64_t limit_of(const ProcessReport& p, int32_t device) {
  for (const DeviceFragmentation& d : p.fragmentation)
    if (d.device == device) return d.limit_bytes ? d.limit_bytes : d.device_total;
  return 0;
}

// Checkpointing, mixed precision and (when the pass did not fit) a micro-batch, when activations
// dominate the moment; true when it advised.
bool advise_pressure(const ProcessReport& p, const Pressure& m, std::vector<Advice>& out) {
  const Shares s = shares(m);
  if (s.tensors == 0 || s.activations < kDominates * static_cast<double>(s.tensors) ||
      s.activations <= s.weights)
    return false;
  const std::string& finding = m.finding;
  const std::string evidence = fmt::format(
      "{}: activations {} of {} in tensors ({:.0f} %), weights, gradients and optimizer state {}",
      m.moment, human_bytes(s.activations), human_bytes(s.tensors),
      100.0 * static_cast<double>(s.activations) / static_cast<double>(s.tensors),
      human_bytes(s.weights));
  uint64_t site_bytes = 0;
  const std::string sites = heaviest_sites(*p.categories, site_bytes);
  out.push_back(
      {"activation-checkpointing", "Recompute activations instead of keeping them",
       sites.empty()
           ? "Wrap the largest blocks of the model in torch.utils.checkpoint.checkpoint: their "
             "activations are recomputed in the backward pass instead of kept from the forward."
           : fmt::format("Wrap the modules behind {} in torch.utils.checkpoint.checkpoint: "
                         "their activations ({} at the peak) are recomputed in the backward "
                         "pass instead of kept; only each checkpointed block's input stays.",
                         sites, human_bytes(site_bytes)),
       finding, evidence});
  out.push_back(
      {"mixed-precision", "Keep activations in 16 bits",
       fmt::format("Run the forward pass under torch.autocast(\"cuda\", dtype=torch.bfloat16) "
                   "(or float16 with a GradScaler): activations saved in 16 bits take half "
                   "the bytes of float32 ones, up to {} less here if they are float32 now "
                   "(the trace does not record dtypes).",
                   human_bytes(s.activations / 2)),
       finding, evidence});
  // Activations (and the failed request, part of the same pass) scale with the batch; the rest
  // does not.
  const uint64_t limit = m.limit;
  if (m.requested == 0) {  // a peak that fitted: what half the batch would give back
    // What the peak needs, the allocator's cache aside (it is reused, not needed).
    const uint64_t total = s.tensors + m.at->of(MemoryCategory::kOutsideTorch);
    const uint64_t halved = total - s.activations / 2;
    out.push_back(
        {"micro-batch", "Split the batch and accumulate gradients",
         fmt::format(
             "Activations grow with the batch: 2 micro-batches of half the batch each "
             "(backward() on each, optimizer.step() once) keep the effective batch and "
             "give back about {}, bringing what this peak needs beyond the allocator's "
             "cache from {} to about {}{}.",
             human_bytes(s.activations / 2), human_bytes(total), human_bytes(halved),
             limit ? fmt::format(" ({:.0f} % of {})",
                                 100.0 * static_cast<double>(halved) / static_cast<double>(limit),
                                 human_bytes(limit))
                   : std::string()),
         finding, evidence});
    return true;
  }
  // What stays: the tensors that are no activations and memory outside PyTorch's allocator (its
  // cache is free for the activations to use).
  const uint64_t fixed = s.tensors - s.activations + m.at->of(MemoryCategory::kOutsideTorch);
  if (limit > fixed) {
    const double fits =
        static_cast<double>(limit - fixed) / static_cast<double>(s.activations + m.requested);
    if (fits < 1) {
      const int micro = static_cast<int>(std::ceil(1 / std::max(fits, 1e-3)));
      out.push_back(
          {"micro-batch", "Split the batch and accumulate gradients",
           fmt::format("Activations grow with the batch: at most {:.0f} % of this batch fits in "
                       "{} next to the {} that does not grow with it. Run {} micro-batches of "
                       "1/{} of the batch each, calling backward() on each and "
                       "optimizer.step() once, to keep the effective batch.",
                       100 * fits, human_bytes(limit), human_bytes(fixed), micro, micro),
           finding, evidence + fmt::format("; the limit: {}", human_bytes(limit))});
    }
  }
  return true;
}

}  // namespace

void advise_activations(const ProcessReport& p, uint64_t capacity, std::vector<Advice>& out) {
  if (!p.categories || !p.categories->tagged) return;
  std::vector<int32_t> advised;  // the first OOM of each device says it
  for (const CategoryOom& o : p.categories->ooms) {
    if (std::find(advised.begin(), advised.end(), o.device) != advised.end()) continue;
    Pressure m{
        o.device,
        &o.at,
        o.in_pass,
        o.requested,
        limit_of(p, o.device),
        fmt::format("oom:{}:{}", p.info.pid, o.device),
        fmt::format("at the OOM on device {} (asking {})", o.device, human_bytes(o.requested))};
    if (advise_pressure(p, m, out)) advised.push_back(o.device);
  }
  // Without an OOM, a peak that came near what the process may use, activations dominating it.
  const uint64_t peak = p.summary.peak_bytes;
  if (!advised.empty() || !capacity ||
      static_cast<double>(peak) < kNearCapacity * static_cast<double>(capacity))
    return;
  Pressure m{
      0,
      &p.categories->peak,
      0,
      0,
      capacity,
      fmt::format("peak:{}", p.info.pid),
      fmt::format("at the peak ({} of {}, {:.0f} %)", human_bytes(peak), human_bytes(capacity),
                  100.0 * static_cast<double>(peak) / static_cast<double>(capacity))};
  advise_pressure(p, m, out);
}

}  // namespace gpumemshim::analyzer

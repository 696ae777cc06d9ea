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

struct OomShares {
  uint64_t activations = 0;  // confirmed, plus the stopped pass's
  uint64_t weights = 0;      // parameters, gradients, optimizer state
  uint64_t tensors = 0;      // every tensor category
};

OomShares shares(const CategoryOom& o) {
  const CategoryBytes& c = o.at;
  OomShares s;
  s.weights = c.of(MemoryCategory::kParameter) + c.of(MemoryCategory::kGradient) +
              c.of(MemoryCategory::kOptimizerState);
  s.activations =
      c.of(MemoryCategory::kActivation) + std::min(o.in_pass, c.of(MemoryCategory::kTemporary));
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

void advise_oom(const ProcessReport& p, const CategoryOom& o, std::vector<Advice>& out) {
  const OomShares s = shares(o);
  if (s.tensors == 0 || s.activations < kDominates * static_cast<double>(s.tensors) ||
      s.activations <= s.weights)
    return;
  const std::string finding = fmt::format("oom:{}:{}", p.info.pid, o.device);
  const std::string evidence = fmt::format(
      "at the OOM on device {} (asking {}): activations {} of {} in tensors ({:.0f} %), weights, "
      "gradients and optimizer state {}",
      o.device, human_bytes(o.requested), human_bytes(s.activations), human_bytes(s.tensors),
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
  const uint64_t limit = limit_of(p, o.device);
  // What stays: the tensors that are no activations and memory outside PyTorch's allocator (its
  // cache is free for the activations to use).
  const uint64_t fixed = s.tensors - s.activations + o.at.of(MemoryCategory::kOutsideTorch);
  if (limit > fixed) {
    const double fits =
        static_cast<double>(limit - fixed) / static_cast<double>(s.activations + o.requested);
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
}

}  // namespace

void advise_activations(const ProcessReport& p, std::vector<Advice>& out) {
  if (!p.categories || !p.categories->tagged) return;
  std::vector<int32_t> advised;  // the first OOM of each device says it
  for (const CategoryOom& o : p.categories->ooms) {
    if (std::find(advised.begin(), advised.end(), o.device) != advised.end()) continue;
    const size_t before = out.size();
    advise_oom(p, o, out);
    if (out.size() != before) advised.push_back(o.device);
  }
}

}  // namespace gpumemshim::analyzer

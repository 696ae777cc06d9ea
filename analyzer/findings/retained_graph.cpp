#include "findings/retained_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "findings/advice.h"
#include "gpumemshim/analyzer/report.h"
#include "gpumemshim/analyzer/units.h"

namespace gpumemshim::analyzer {

namespace {

// The frames a site is known by: a kept site and a growing one are the same place when their
// innermost frames are.
bool same_place(const std::vector<Frame>& a, const std::vector<Frame>& b) {
  if (a.empty() || b.empty()) return false;
  const Frame& x = a.front();
  const Frame& y = b.front();
  return x.pc == y.pc && x.function == y.function && x.file == y.file && x.line == y.line;
}

// The advice that names the line keeping the graph, when the growth rule found one (a tensor
// summed across steps): that line, else empty.
std::string keeping_line(const ProcessReport& p, const std::vector<Advice>& out) {
  for (const Advice& a : out)
    if (a.id == "item-or-detach")
      for (const Growth& g : p.growth)
        if (a.finding == "growth:" + g.id) return user_place(g.stack);
  return {};
}

}  // namespace

void advise_retained_graphs(const ProcessReport& p, std::vector<Advice>& out) {
  if (!p.categories || p.categories->kept_sites.empty()) return;
  const std::string keeper = keeping_line(p, out);
  for (const Growth& g : p.growth) {
    if (g.suppressed || !g.torch_block || g.bytes_per_step <= 0) continue;
    auto kept = std::find_if(p.categories->kept_sites.begin(), p.categories->kept_sites.end(),
                             [&](const CategorySite& s) { return same_place(s.stack, g.stack); });
    // At least a step's growth is blocks that outlived their backward pass: the growth is them.
    if (kept == p.categories->kept_sites.end() ||
        static_cast<double>(kept->bytes) < g.bytes_per_step)
      continue;
    std::string forward_lines;
    uint64_t kept_bytes = 0;
    for (size_t i = 0; i < p.categories->kept_sites.size() && i < 3; ++i) {
      const CategorySite& s = p.categories->kept_sites[i];
      forward_lines +=
          fmt::format("{}{} ({})", i ? ", " : "", user_place(s.stack), human_bytes(s.bytes));
      kept_bytes += s.bytes;
    }
    out.push_back(
        {"retained-graph", "An autograd graph outlives its step",
         fmt::format(
             "Blocks made by the forward pass at {} outlive the backward pass after it, step after "
             "step: an autograd graph is kept past its step with the activations it saved{}. Keep "
             "numbers or detached tensors across steps (loss.item(), out.detach()), and run what "
             "is only "
             "evaluated under torch.no_grad().",
             user_place(g.stack),
             keeper.empty()
                 ? std::string(" (a loss summed as a tensor, or losses or outputs kept in a "
                               "list or dict)")
                 : fmt::format(", held by the tensor made at {}", keeper)),
         "growth:" + g.id,
         fmt::format(
             "{:.0f} bytes per step over {} steps at {}; at the end {} made by forward passes had "
             "outlived the backward pass after them: {}",
             g.bytes_per_step, g.steps, user_place(g.stack), human_bytes(kept_bytes),
             forward_lines)});
  }
}

}  // namespace gpumemshim::analyzer

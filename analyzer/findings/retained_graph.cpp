#include "findings/retained_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>

#include "findings/advice.h"
#include "findings/graph_keeper.h"
#include "gpumemshim/analyzer/report.h"
#include "gpumemshim/analyzer/units.h"

namespace gpumemshim::analyzer {

namespace {

constexpr const char* kCause = "retained_graph";

// The frames a site is known by: a kept site and a growing one are the same place when their
// innermost frames are.
bool same_place(const std::vector<Frame>& a, const std::vector<Frame>& b) {
  if (a.empty() || b.empty()) return false;
  const Frame& x = a.front();
  const Frame& y = b.front();
  return x.pc == y.pc && x.function == y.function && x.file == y.file && x.line == y.line;
}

// The user's own Python frames: installed packages (torch's modules, transformers) are not
// where a loop keeps a graph, and their frames are shared by every forward pass.
bool installed(const Frame& f) {
  return f.file.find("/site-packages/") != std::string::npos ||
         f.file.find("/dist-packages/") != std::string::npos;
}

std::vector<const Frame*> python_frames(const std::vector<Frame>& stack) {
  std::vector<const Frame*> out;
  for (const Frame& f : stack)
    if (f.python && !f.file.empty() && f.line && f.file.front() != '<' && !installed(f))
      out.push_back(&f);
  return out;
}

// The loop line whose forward pass made the growing blocks: in the growth's own stack, the first
// user frame past the model's code and the framework's calling machinery (nn.Module.__call__)
// between it and the loop; without such machinery, the innermost user line itself.
std::optional<Frame> making_line(const std::vector<Frame>& stack) {
  std::vector<const Frame*> user = python_frames(stack);
  if (user.empty()) return std::nullopt;
  bool inside = false, past_framework = false;
  for (const Frame& f : stack) {
    if (&f == user.front()) inside = true;
    if (!inside || &f == user.front() || !f.python) continue;
    if (installed(f))
      past_framework = true;
    else if (past_framework && std::find(user.begin(), user.end(), &f) != user.end())
      return f;
  }
  return *user.front();
}

std::string place(const Frame& f) {
  return fmt::format("{}:{}", f.file, f.line);
}

}  // namespace

void find_retained_graphs(ProcessReport& p) {
  if (!p.categories || p.categories->kept_sites.empty()) return;
  const std::vector<CategorySite>& kept = p.categories->kept_sites;
  for (Growth& g : p.growth) {
    if (g.suppressed || !g.torch_block || g.bytes_per_step <= 0) continue;
    auto site = std::find_if(kept.begin(), kept.end(),
                             [&](const CategorySite& s) { return same_place(s.stack, g.stack); });
    // At least a step's growth is blocks that outlived their backward pass: the growth is them.
    if (site == kept.end() || static_cast<double>(site->bytes) < g.bytes_per_step) continue;
    g.cause = kCause;
    const std::optional<Frame> made = making_line(g.stack);
    const std::optional<GraphKeeper> keeper =
        made ? find_graph_keeper(made->file, made->line) : std::nullopt;
    if (made) g.graph_made_at = place(*made);
    if (keeper) {
      g.graph_held_at = fmt::format("{}:{}", made->file, keeper->line);
      g.graph_held_how = keeper->how;
      g.graph_held_text = keeper->text;
    }
  }
}

void advise_retained_graphs(const ProcessReport& p, std::vector<Advice>& out) {
  for (const Growth& g : p.growth) {
    if (g.cause != kCause) continue;
    std::string forward_lines;
    uint64_t kept_bytes = 0;
    for (size_t i = 0; i < p.categories->kept_sites.size() && i < 3; ++i) {
      const CategorySite& s = p.categories->kept_sites[i];
      forward_lines +=
          fmt::format("{}{} ({})", i ? ", " : "", user_place(s.stack), human_bytes(s.bytes));
      kept_bytes += s.bytes;
    }
    const std::string made =
        g.graph_made_at.empty() ? std::string() : fmt::format(" that {} runs", g.graph_made_at);
    const std::string held =
        !g.graph_held_at.empty()
            ? fmt::format(" {} keeps it: `{}` {}.", g.graph_held_at, g.graph_held_text,
                          g.graph_held_how)
            : std::string(
                  " Something keeps it: a loss summed as a tensor, or losses or outputs kept in a "
                  "list or dict.");
    out.push_back(
        {"retained-graph", "An autograd graph outlives its step",
         fmt::format(
             "Blocks made at {} by the forward pass{} outlive the backward pass after it, step "
             "after step: the autograd graph is kept past its step with the activations it "
             "saved.{} Keep numbers or detached tensors across steps (loss.item(), "
             "out.detach()), and run what is only evaluated under torch.no_grad().",
             user_place(g.stack), made, held),
         "growth:" + g.id,
         fmt::format(
             "{:.0f} bytes per step over {} steps at {}; at the end {} made by forward passes had "
             "outlived the backward pass after them: {}",
             g.bytes_per_step, g.steps, user_place(g.stack), human_bytes(kept_bytes),
             forward_lines)});
  }
}

}  // namespace gpumemshim::analyzer

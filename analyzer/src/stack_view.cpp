#include "gpumemshim/analyzer/stack_view.h"

#include <fmt/format.h>

namespace gpumemshim::analyzer {

namespace {
std::string_view base_name(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}
}  // namespace

bool is_shim_module(const std::string& path) {
  return base_name(path).starts_with("libgpumemshim");
}

StackView::StackView(const LoadedTrace& trace, size_t max_frames)
    : trace_(trace), max_frames_(max_frames) {
  for (const ModuleInfo& m : trace.modules) symbolizer_.add_module(m);
}

const std::vector<Frame>& StackView::frames(uint64_t stack_id) {
  auto cached = cache_.find(stack_id);
  if (cached != cache_.end()) return cached->second;
  std::vector<Frame>& out = cache_[stack_id];
  auto it = trace_.stacks.find(stack_id);
  if (stack_id == 0 || it == trace_.stacks.end()) return out;
  const std::vector<uint64_t>& pcs = it->second;
  bool dropping = true;
  for (size_t i = 0; i < pcs.size() && out.size() < max_frames_; ++i) {
    const ModuleInfo* m = symbolizer_.module_for(pcs[i]);
    if (dropping && m != nullptr && is_shim_module(m->path)) continue;
    dropping = false;
    std::vector<SourceFrame> sf = symbolizer_.symbolize(pcs[i], /*is_return_address=*/i > 0);
    if (sf.empty()) sf.push_back(SourceFrame{{}, {}, 0, m ? m->path : std::string(), pcs[i], false});
    for (SourceFrame& s : sf) {
      if (out.size() >= max_frames_) break;
      Frame f;
      f.function = std::move(s.function);
      f.file = std::move(s.file);
      f.line = s.line;
      f.module = s.module.empty() && m ? m->path : std::move(s.module);
      f.pc = pcs[i];
      f.module_offset = m ? pcs[i] - m->load_bias : 0;
      f.inlined = s.inlined;
      out.push_back(std::move(f));
    }
  }
  return out;
}

std::string StackView::stable_key(const std::vector<Frame>& frames) {
  std::string key;
  for (const Frame& f : frames) {
    if (!f.function.empty() || !f.file.empty()) {
      key += fmt::format("{}|{}|{}|{};", f.function, f.file, f.line, base_name(f.module));
    } else {
      key += fmt::format("{}+{:#x};", base_name(f.module), f.module_offset);
    }
  }
  return key;
}

}  // namespace gpumemshim::analyzer

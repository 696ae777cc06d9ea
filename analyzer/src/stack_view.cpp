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

// A statically linked cudart's functions carry no line information and are named cudaX / cuX /
// cudart::... / __cudartNNN / libcudart_static_<hash>.
bool is_cuda_internal(const Frame& f) {
  std::string_view module = base_name(f.module);
  if (module.starts_with("libcudart") || module.starts_with("libcuda.") ||
      module.starts_with("libnvidia")) return true;
  // CUDA's header templates (cudaMalloc<T> in cuda_runtime.h) are inlined into the caller.
  std::string_view file = base_name(f.file);
  if (file.starts_with("cuda_runtime") || file == "cuda.h") return true;
  if (!f.file.empty()) return false;
  std::string_view fn = f.function;
  if (fn.starts_with("cudart::") || fn.starts_with("__cudart") ||
      fn.starts_with("libcudart_static_"))  // CUDA 13's static cudart names its internals so
    return true;
  auto api_like = [&](std::string_view prefix) {
    return fn.size() > prefix.size() && fn.starts_with(prefix) &&
           fn[prefix.size()] >= 'A' && fn[prefix.size()] <= 'Z';
  };
  return api_like("cuda") || api_like("cu");
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
  // The innermost user-meaningful frame first: drop CUDA's own frames above it (if anything is
  // left; a stack made only of CUDA frames is kept whole).
  size_t first_user = 0;
  while (first_user < out.size() && is_cuda_internal(out[first_user])) ++first_user;
  if (first_user < out.size()) out.erase(out.begin(), out.begin() + static_cast<long>(first_user));
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

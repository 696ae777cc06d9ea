#include "render/sites.h"

#include <fmt/format.h>

#include "gpumemshim/analyzer/units.h"

namespace gpumemshim::analyzer {

const Frame* user_frame(const std::vector<Frame>& stack) {
  for (const Frame& f : stack)
    if (!f.file.empty() && f.line > 0) return &f;
  return nullptr;
}

std::string site_label(const std::vector<Frame>& stack) {
  if (const Frame* f = user_frame(stack)) return fmt::format("{}:{}", f->file, f->line);
  if (!stack.empty()) {
    if (!stack[0].function.empty()) return stack[0].function;
    if (!stack[0].module.empty()) return fmt::format("{}+{}", stack[0].module, pc_hex(stack[0].pc));
  }
  return "unknown site";
}

std::string stack_text(const std::vector<Frame>& stack) {
  std::string out;
  size_t i = 0;
  for (const Frame& f : stack) {
    out += fmt::format("    #{} {}", i++, function_or_pc(f));
    if (!f.file.empty()) out += fmt::format(" {}:{}", f.file, f.line);
    if (!f.module.empty()) out += fmt::format(" ({})", f.module);
    out += "\n";
  }
  return out;
}

std::string function_or_pc(const Frame& frame) {
  return frame.function.empty() ? pc_hex(frame.pc) : frame.function;
}

std::string frame_at(const Frame& frame, bool with_module) {
  std::string out = function_or_pc(frame);
  if (!frame.file.empty()) {
    out += frame.line ? fmt::format(" at {}:{}", frame.file, frame.line) : " at " + frame.file;
  } else if (with_module && !frame.module.empty()) {
    out += " (" + frame.module + ")";
  }
  return out;
}

std::string api_label(bool torch_block, Api api) {
  return torch_block ? std::string("torch.alloc") : std::string(format::api_name(api));
}

std::string memory_label(bool torch_block, MemoryKind memory) {
  return torch_block ? std::string("torch_block") : std::string(format::memory_kind_name(memory));
}

std::string category_label(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParameter:
      return "parameters";
    case MemoryCategory::kGradient:
      return "gradients";
    case MemoryCategory::kOptimizerState:
      return "optimizer state";
    case MemoryCategory::kActivation:
      return "activations";
    case MemoryCategory::kTemporary:
      return "temporaries";
    case MemoryCategory::kAllocatorCache:
      return "allocator cache";
    case MemoryCategory::kOutsideTorch:
      return "outside PyTorch";
  }
  return "unknown";
}

std::string plural(uint64_t n, const char* word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

std::string growth_cause(const Growth& g) {
  if (g.cause != "retained_graph") return {};
  std::string out = "an autograd graph kept past its step holds the activations it saved";
  if (!g.graph_made_at.empty()) out += fmt::format("; its forward pass runs at {}", g.graph_made_at);
  if (!g.graph_held_at.empty())
    out += fmt::format("; {} keeps it: `{}` {}", g.graph_held_at, g.graph_held_text, g.graph_held_how);
  return out;
}

}  // namespace gpumemshim::analyzer

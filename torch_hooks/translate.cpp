#include "translate.h"

namespace gpumemshim::torch_hooks {

using format::TorchAction;

std::optional<TorchAction> translate_action(int action_index) noexcept {
  switch (static_cast<TraceAction>(action_index)) {
    case TraceAction::kAlloc: return TorchAction::kAlloc;
    case TraceAction::kFreeRequested: return TorchAction::kFreeRequested;
    case TraceAction::kFreeCompleted: return TorchAction::kFreeCompleted;
    case TraceAction::kSegmentAlloc: return TorchAction::kSegmentAlloc;
    case TraceAction::kSegmentFree: return TorchAction::kSegmentFree;
    case TraceAction::kSegmentMap: return TorchAction::kSegmentMap;
    case TraceAction::kSegmentUnmap: return TorchAction::kSegmentUnmap;
    case TraceAction::kSnapshot: return std::nullopt;  // correlates a snapshot, not a memory event
    case TraceAction::kOom: return TorchAction::kOom;
  }
  return std::nullopt;  // an action of a later torch
}

std::optional<TorchEventArgs> translate(const TorchTraceEvent& e) noexcept {
  std::optional<TorchAction> action = translate_action(e.action_index);
  if (!action) return std::nullopt;
  TorchEventArgs a;
  a.action = *action;
  a.device = e.device;
  a.address = e.addr;
  a.size = e.size;
  a.stream = static_cast<uint64_t>(e.stream);
  return a;
}

}  // namespace gpumemshim::torch_hooks

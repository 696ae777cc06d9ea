#include "translate.h"

namespace gpumemshim::torch_hooks {

int translate_action(int action_index) noexcept {
  switch (action_index) {
    case 0: return 1;  // ALLOC -> alloc
    case 1: return 2;  // FREE_REQUESTED -> free_requested
    case 2: return 3;  // FREE_COMPLETED -> free_completed
    case 3: return 4;  // SEGMENT_ALLOC -> segment_alloc
    case 4: return 5;  // SEGMENT_FREE -> segment_free
    case 5: return 6;  // SEGMENT_MAP -> segment_map
    case 6: return 7;  // SEGMENT_UNMAP -> segment_unmap
    case 7: return kSkip;  // SNAPSHOT: correlates a memory snapshot, not a memory event
    case 8: return 8;  // OOM -> oom
    default: return kSkip;  // an action of a later torch
  }
}

TorchEventArgs translate(const TorchTraceEvent& e) noexcept {
  TorchEventArgs a;
  a.action = translate_action(e.action_index);
  if (a.action == kSkip) return a;
  a.device = e.device;
  a.address = e.addr;
  a.size = e.size;
  a.stream = static_cast<uint64_t>(e.stream);
  return a;
}

}  // namespace gpumemshim::torch_hooks

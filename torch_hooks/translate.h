// Translation of PyTorch's caching-allocator trace events into gpumemshim's TorchEvent actions, in
// plain code: no torch include, so unit tests drive it without torch. The bridge (bridge.cpp)
// copies the fields of c10::CachingDeviceAllocator::TraceEntry into the mirror below; the
// TraceEntry layout changes between torch versions, the mirror does not.
#pragma once
#include <cstdint>

namespace gpumemshim::torch_hooks {

// The fields of a TraceEntry that gpumemshim records. action_index is the value of
// TraceEntry::Action: 0 ALLOC, 1 FREE_REQUESTED, 2 FREE_COMPLETED, 3 SEGMENT_ALLOC,
// 4 SEGMENT_FREE, 5 SEGMENT_MAP, 6 SEGMENT_UNMAP, 7 SNAPSHOT, 8 OOM.
struct TorchTraceEvent {
  int action_index = 0;
  int device = 0;
  uint64_t addr = 0;  // OOM: the device's free bytes
  uint64_t size = 0;
  uintptr_t stream = 0;
};

// A TorchEvent record's action (format::TorchAction value, 1..8), or kSkip for events that are
// not recorded (SNAPSHOT, values from a later torch).
inline constexpr int kSkip = 0;
int translate_action(int action_index) noexcept;

// The arguments of gpumemshim_torch_event for one event; valid only when action != kSkip.
struct TorchEventArgs {
  int action = kSkip;
  int device = 0;
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
};
TorchEventArgs translate(const TorchTraceEvent& e) noexcept;

}  // namespace gpumemshim::torch_hooks

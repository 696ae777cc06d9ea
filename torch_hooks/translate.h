// Translation of PyTorch's caching-allocator trace events into gpumemshim's TorchEvent actions, in
// plain code: no torch include, so unit tests drive it without torch. The bridge (bridge.cpp)
// copies the fields of c10::CachingDeviceAllocator::TraceEntry into the mirror below; the
// TraceEntry layout changes between torch versions, the mirror does not.
#pragma once
#include <cstdint>
#include <optional>

#include "gpumemshim/format/records.h"

namespace gpumemshim::torch_hooks {

// TraceEntry::Action's values. bridge.cpp checks each against torch's own enum at compile time.
enum class TraceAction : int {
  kAlloc = 0,
  kFreeRequested = 1,
  kFreeCompleted = 2,
  kSegmentAlloc = 3,
  kSegmentFree = 4,
  kSegmentMap = 5,
  kSegmentUnmap = 6,
  kSnapshot = 7,
  kOom = 8,
};

// The fields of a TraceEntry that gpumemshim records. action_index is the value of
// TraceEntry::Action as torch gave it: a later torch may add values that TraceAction lacks.
struct TorchTraceEvent {
  int action_index = 0;
  int device = 0;
  uint64_t addr = 0;  // OOM: the device's free bytes
  uint64_t size = 0;
  uintptr_t stream = 0;
};

// A TorchEvent record's action, or nullopt for events that are not recorded (SNAPSHOT, values from
// a later torch).
std::optional<format::TorchAction> translate_action(int action_index) noexcept;

// The arguments of gpumemshim_torch_event for one recorded event.
struct TorchEventArgs {
  format::TorchAction action = format::TorchAction::kAlloc;
  int device = 0;
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stream = 0;
};
std::optional<TorchEventArgs> translate(const TorchTraceEvent& e) noexcept;

}  // namespace gpumemshim::torch_hooks

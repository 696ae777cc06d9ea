#include "gpumemshim/format/records.h"

namespace gpumemshim::format {

std::string_view api_name(Api api) {
  static constexpr std::string_view kNames[kApiCount] = {
      "unknown", "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync",
      "cudaMallocFromPoolAsync", "cudaMallocManaged", "cudaMallocPitch", "cudaMalloc3D",
      "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost", "cudaMemGetInfo", "cuMemAlloc_v2",
      "cuMemFree_v2", "cuMemAllocPitch_v2", "cuMemAllocManaged", "cuMemAllocAsync",
      "cuMemFreeAsync", "cuMemAllocFromPoolAsync", "cuMemCreate", "cuMemRelease", "cuMemMap",
      "cuMemUnmap", "cuMemAddressReserve", "cuMemAddressFree", "cuMemHostAlloc",
      "cuMemAllocHost_v2", "cuMemFreeHost", "cuMemGetInfo_v2"};
  auto i = static_cast<uint8_t>(api);
  return i < kApiCount ? kNames[i] : "unknown";
}

std::string_view memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kDevice: return "device";
    case MemoryKind::kManaged: return "managed";
    case MemoryKind::kPinnedHost: return "pinned_host";
    case MemoryKind::kPool: return "pool";
    case MemoryKind::kPhysical: return "vmm_physical";
    case MemoryKind::kMapping: return "vmm_mapping";
    case MemoryKind::kReservation: return "va_reservation";
  }
  return "unknown";
}

std::string_view torch_action_name(TorchAction action) {
  switch (action) {
    case TorchAction::kAlloc: return "alloc";
    case TorchAction::kFreeRequested: return "free_requested";
    case TorchAction::kFreeCompleted: return "free_completed";
    case TorchAction::kSegmentAlloc: return "segment_alloc";
    case TorchAction::kSegmentFree: return "segment_free";
    case TorchAction::kSegmentMap: return "segment_map";
    case TorchAction::kSegmentUnmap: return "segment_unmap";
    case TorchAction::kOom: return "oom";
    case TorchAction::kTag:
      return "tag";
  }
  return "unknown";
}

std::string_view tensor_category_name(TensorCategory category) {
  switch (category) {
    case TensorCategory::kParameter:
      return "parameter";
    case TensorCategory::kGradient:
      return "gradient";
    case TensorCategory::kOptimizerState:
      return "optimizer_state";
    case TensorCategory::kActivation:
      return "activation";
  }
  return "unknown";
}

std::string_view marker_kind_name(MarkerKind kind) {
  switch (kind) {
    case MarkerKind::kMark: return "mark";
    case MarkerKind::kStep: return "step";
    case MarkerKind::kRangePush: return "range_push";
    case MarkerKind::kRangePop: return "range_pop";
  }
  return "unknown";
}

}  // namespace gpumemshim::format

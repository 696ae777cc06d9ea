#include "torch_api.h"

#include "../record/recorder.h"

namespace fmtrec = gpumemshim::format;
namespace shim = gpumemshim::shim;

namespace {
// The allocator's own actions; a tag comes only through gpumemshim_tensor_tag, whose category is
// checked.
bool allocator_action(int action) {
  return action >= 1 && action <= fmtrec::kTorchActionMax &&
         action != static_cast<int>(fmtrec::TorchAction::kTag);
}
}  // namespace

GPUMEMSHIM_API void gpumemshim_torch_event(int action, int device, uint64_t address, uint64_t size,
                                           uint64_t stream) {
  if (!allocator_action(action)) return;
  if (shim::recording_off()) return;
  shim::record_torch_event(static_cast<fmtrec::TorchAction>(action), device, stream, address, size);
}

GPUMEMSHIM_API void gpumemshim_torch_event_grad_fn(int action, int device, uint64_t address,
                                                   uint64_t size, uint64_t stream,
                                                   const char* grad_fn) {
  if (!allocator_action(action)) return;
  if (shim::recording_off()) return;
  shim::record_torch_event(static_cast<fmtrec::TorchAction>(action), device, stream, address, size,
                           grad_fn);
}

GPUMEMSHIM_API void gpumemshim_torch_event_walk(int action, int device, uint64_t address,
                                                uint64_t size, uint64_t stream,
                                                const char* grad_fn) {
  if (!allocator_action(action)) return;
  if (shim::recording_off()) return;
  shim::record_torch_event(static_cast<fmtrec::TorchAction>(action), device, stream, address, size,
                           grad_fn, /*walk=*/true);
}

namespace {
void tag(int device, uint64_t address, uint64_t category) {
  if (category < 1 || category > fmtrec::kTensorCategoryMax || address == 0) return;
  shim::record_torch_event(fmtrec::TorchAction::kTag, device, 0, address, category);
}
}  // namespace

GPUMEMSHIM_API void gpumemshim_tensor_tag(int device, uint64_t address, int category) {
  if (category < 0 || shim::recording_off()) return;
  tag(device, address, static_cast<uint64_t>(category));
}

GPUMEMSHIM_API void gpumemshim_tensor_tags(const uint64_t* tags, uint64_t count) {
  if (tags == nullptr || shim::recording_off()) return;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t* t = tags + 3 * i;
    if (t[0] > static_cast<uint64_t>(INT32_MAX)) continue;  // no device: a stray or wrapped -1
    tag(static_cast<int>(t[0]), t[1], t[2]);
  }
}

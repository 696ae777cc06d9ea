#include "torch_api.h"

#include "../record/recorder.h"

namespace fmtrec = gpumemshim::format;
namespace shim = gpumemshim::shim;

GPUMEMSHIM_API void gpumemshim_torch_event(int action, int device, uint64_t address, uint64_t size,
                                           uint64_t stream) {
  if (action < 1 || action > fmtrec::kTorchActionMax) return;
  if (shim::recording_off()) return;
  shim::record_torch_event(static_cast<fmtrec::TorchAction>(action), device, stream, address, size);
}

GPUMEMSHIM_API void gpumemshim_torch_event_grad_fn(int action, int device, uint64_t address,
                                                   uint64_t size, uint64_t stream, const char* grad_fn) {
  if (action < 1 || action > fmtrec::kTorchActionMax) return;
  if (shim::recording_off()) return;
  shim::record_torch_event(static_cast<fmtrec::TorchAction>(action), device, stream, address, size,
                           grad_fn);
}

GPUMEMSHIM_API void gpumemshim_torch_event_walk(int action, int device, uint64_t address,
                                                uint64_t size, uint64_t stream,
                                                const char* grad_fn) {
  if (action < 1 || action > fmtrec::kTorchActionMax) return;
  if (shim::recording_off()) return;
  shim::record_torch_event(static_cast<fmtrec::TorchAction>(action), device, stream, address, size,
                           grad_fn, /*walk=*/true);
}

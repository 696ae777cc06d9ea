// NVTX v3 injection, one source of step markers. Header-only NVTX (PyTorch ≥ 2.5, most CUDA
// code; they link no libnvToolsExt, so preloading its symbols would see nothing) loads the library
// named by NVTX_INJECTION64_PATH at its first call and calls that library's
// InitializeInjectionNvtx2. The shim points the variable at itself (unless another
// tool, e.g. nsys, already owns it) and turns default-domain marks and push/pop ranges into
// Marker records:
//   nvtxMarkA / nvtxMarkW / nvtxMarkEx          -> MarkerKind::kMark
//   nvtxRangePushA / nvtxRangePushW / ...PushEx -> MarkerKind::kRangePush
//   nvtxRangePop                                -> MarkerKind::kRangePop
// Not attached: start/end ranges (not nested, may end on another thread), domain events
// (NCCL and other libraries annotate every call through their own domains), naming calls. NVTX
// makes whatever a tool does not attach a no-op.
#pragma once

#include <cstdint>

namespace gpumemshim::shim {

// True when this build has NVTX support (the NVTX v3 headers were found at build time).
bool nvtx_injection_built();

}  // namespace gpumemshim::shim

extern "C" {
// The NVTX injection entry point. `get_export_table` is NVTX's NvtxGetExportTableFunc_t.
// Returns 1 when the callbacks were attached, 0 to decline (NVTX then makes every call a no-op).
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    const void* (*get_export_table)(uint32_t export_table_id));
}

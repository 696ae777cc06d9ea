// The memory a process may use on a device, when it is its own limit rather than the device's:
// PyTorch's per-process memory fraction (torch.cuda.set_per_process_memory_fraction), which caps
// what its caching allocator may reserve at fraction x the device total the process sees. A smaller
// device seen through CUDA_VISIBLE_DEVICES or a MIG instance needs nothing here: cudaMemGetInfo
// already reports it. Known from the trace's attributes (docs/trace-format.md):
//   torch.memory_fraction.<device>  the fraction set (the Python package writes it)
//   torch.allowed_bytes.<device>    the allocator's own cap in bytes, as its OOM observer reports
//                                   it (the torch bridge writes it at an OOM)
// A key written several times counts with its last value.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpumemshim::analyzer {

struct MemoryLimit {
  uint64_t bytes = 0;   // 0: no limit of the process's own is known
  double fraction = 0;  // the fraction behind it, 0 when not known
  uint64_t device_total = 0;
  bool known() const { return bytes != 0; }
};

// The process's limit on `device`, from its attributes and the device's total (0: unknown). A
// fraction of 1 or more, or one without a device total, is no limit; a cap in bytes at or above the
// device total neither.
MemoryLimit memory_limit(const std::vector<std::pair<std::string, std::string>>& attributes,
                         int32_t device, uint64_t device_total);

}  // namespace gpumemshim::analyzer

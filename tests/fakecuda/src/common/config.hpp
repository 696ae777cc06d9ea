// Environment configuration of the fake CUDA, read once (on first use) per library.
#pragma once

#include <cstdint>
#include <string>

namespace fakecuda {

struct Config {
  std::uint64_t total_mem = 85899345920ULL;  // FAKECUDA_TOTAL_MEM, bytes per device
  int devices = 1;                           // FAKECUDA_DEVICES
  std::uint64_t oom_after = UINT64_MAX;      // FAKECUDA_OOM_AFTER, bytes in use over all devices
  int fail_code = 2;                         // FAKECUDA_FAIL_CODE
  // The fake NVML (libnvidia-ml.so.1, src/nvml).
  bool nvml = true;                                 // FAKECUDA_NVML=0: nvmlInit fails
  std::uint64_t nvml_context_bytes = 300ULL << 20;  // FAKECUDA_NVML_CONTEXT_BYTES
  std::uint64_t nvml_other_bytes = 0;               // FAKECUDA_NVML_OTHER_BYTES
  std::uint64_t nvml_pid = 0;                       // FAKECUDA_NVML_PID (0: the caller's pid)
  bool nvml_mig = false;                            // FAKECUDA_NVML_MIG=1
  std::uint64_t nvml_init_delay_ms = 0;             // FAKECUDA_NVML_INIT_DELAY_MS
  std::uint64_t nvml_query_delay_ms = 0;            // FAKECUDA_NVML_QUERY_DELAY_MS
  std::string nvml_init_mark;  // FAKECUDA_NVML_INIT_MARK: a file nvmlInit appends to
};

const Config& config();

// FAKECUDA_FAIL injection: counts this call of `name` and returns the error
// code to fail it with, or 0 to let it proceed.
int injected_failure(const char* name);

}  // namespace fakecuda

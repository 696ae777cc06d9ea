// Environment configuration of the fake CUDA, read once (on first use) per library.
#pragma once

#include <cstdint>

namespace fakecuda {

struct Config {
  std::uint64_t total_mem = 85899345920ULL;  // FAKECUDA_TOTAL_MEM, bytes per device
  int devices = 1;                           // FAKECUDA_DEVICES
  std::uint64_t oom_after = UINT64_MAX;      // FAKECUDA_OOM_AFTER, bytes in use over all devices
  int fail_code = 2;                         // FAKECUDA_FAIL_CODE
};

const Config& config();

// FAKECUDA_FAIL injection: counts this call of `name` and returns the error
// code to fail it with, or 0 to let it proceed.
int injected_failure(const char* name);

}  // namespace fakecuda

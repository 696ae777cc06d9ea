// The shim's settings, read once from GPUMEMSHIM_* variables (the table in README.md). A bad value
// gets one warning and the default; the host program always runs on.
#pragma once
#include <cstdint>

#include "log.h"

namespace gpumemshim::shim {

struct Config {
  char output_pattern[1024] = "gpumemshim.%h.%p.trace";
  bool native_stacks = true;
  bool python_stacks = true;
  uint32_t depth = 64;
  LogLevel log_level = LogLevel::kWarn;
  bool disabled = false;
  bool nvml = true;  // sample NVML's view of the process's device memory (nvml/nvml_sampler.h)
};

inline constexpr uint32_t kMaxDepth = 256;

// Parses the environment; never fails.
Config read_config();

}  // namespace gpumemshim::shim

#include "config.h"

#include <cstdlib>
#include <cstring>

namespace gpumemshim::shim {

namespace {
void parse_stacks(const char* v, Config& c) {
  if (!std::strcmp(v, "native,python") || !std::strcmp(v, "python,native")) {
    c.native_stacks = c.python_stacks = true;
  } else if (!std::strcmp(v, "native")) {
    c.native_stacks = true; c.python_stacks = false;
  } else if (!std::strcmp(v, "python")) {
    c.native_stacks = false; c.python_stacks = true;
  } else if (!std::strcmp(v, "none")) {
    c.native_stacks = c.python_stacks = false;
  } else {
    log_warn("GPUMEMSHIM_STACKS=%s is not one of native,python|python|native|none; using native,python", v);
  }
}

void parse_depth(const char* v, Config& c) {
  char* end = nullptr;
  unsigned long d = std::strtoul(v, &end, 10);
  if (!*v || *end || d < 1 || d > kMaxDepth) {
    log_warn("GPUMEMSHIM_DEPTH=%s is not a number in 1..%u; using %u", v, kMaxDepth, c.depth);
    return;
  }
  c.depth = static_cast<uint32_t>(d);
}

void parse_log(const char* v, Config& c) {
  if (!std::strcmp(v, "quiet")) c.log_level = LogLevel::kQuiet;
  else if (!std::strcmp(v, "warn")) c.log_level = LogLevel::kWarn;
  else if (!std::strcmp(v, "info")) c.log_level = LogLevel::kInfo;
  else if (!std::strcmp(v, "debug")) c.log_level = LogLevel::kDebug;
  else log_warn("GPUMEMSHIM_LOG=%s is not one of quiet|warn|info|debug; using warn", v);
}
}  // namespace

Config read_config() {
  Config c;
  // The log level comes first so that the other warnings obey GPUMEMSHIM_LOG=quiet.
  if (const char* v = std::getenv("GPUMEMSHIM_LOG")) parse_log(v, c);
  set_log_level(c.log_level);
  if (const char* v = std::getenv("GPUMEMSHIM_OUTPUT")) {
    if (!*v || std::strlen(v) >= sizeof c.output_pattern)
      log_warn("GPUMEMSHIM_OUTPUT is empty or too long; using %s", c.output_pattern);
    else
      std::strcpy(c.output_pattern, v);
  }
  if (const char* v = std::getenv("GPUMEMSHIM_STACKS")) parse_stacks(v, c);
  if (const char* v = std::getenv("GPUMEMSHIM_DEPTH")) parse_depth(v, c);
  if (const char* v = std::getenv("GPUMEMSHIM_DISABLE")) {
    if (!std::strcmp(v, "1")) c.disabled = true;
    else if (std::strcmp(v, "0") && *v) log_warn("GPUMEMSHIM_DISABLE=%s is not 0 or 1; recording stays on", v);
  }
  if (const char* v = std::getenv("GPUMEMSHIM_NVML")) {
    if (!std::strcmp(v, "0"))
      c.nvml = false;
    else if (std::strcmp(v, "1") && *v)
      log_warn("GPUMEMSHIM_NVML=%s is not 0 or 1; NVML sampling stays on", v);
  }
  return c;
}

}  // namespace gpumemshim::shim

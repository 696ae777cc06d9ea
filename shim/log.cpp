#include "log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace gpumemshim::shim {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};

// Formats into a stack buffer and writes the line with one write(2): no stdio locks, so it is
// safe between fork and exec and never interleaves with the host program's own output mid-line.
void emit(LogLevel level, const char* fmt, va_list args) {
  if (static_cast<int>(level) > g_level.load(std::memory_order_relaxed)) return;
  char line[512];
  int n = std::snprintf(line, sizeof line, "gpumemshim: ");
  int m = std::vsnprintf(line + n, sizeof line - static_cast<size_t>(n) - 1, fmt, args);
  if (m < 0) return;
  size_t len = static_cast<size_t>(n) + static_cast<size_t>(m);
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  ssize_t ignored = ::write(STDERR_FILENO, line, len);
  (void)ignored;
}
}  // namespace

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }

#define GPUMEMSHIM_DEFINE_LOG(name, level) \
  void name(const char* fmt, ...) {        \
    va_list args;                          \
    va_start(args, fmt);                   \
    emit(level, fmt, args);                \
    va_end(args);                          \
  }
GPUMEMSHIM_DEFINE_LOG(log_warn, LogLevel::kWarn)
GPUMEMSHIM_DEFINE_LOG(log_info, LogLevel::kInfo)
GPUMEMSHIM_DEFINE_LOG(log_debug, LogLevel::kDebug)
#undef GPUMEMSHIM_DEFINE_LOG

}  // namespace gpumemshim::shim

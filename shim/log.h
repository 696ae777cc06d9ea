// One-line diagnostics to stderr, prefixed "gpumemshim:". Never used on the hot path.
#pragma once

namespace gpumemshim::shim {

enum class LogLevel { kQuiet = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void set_log_level(LogLevel level);
void log_warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace gpumemshim::shim

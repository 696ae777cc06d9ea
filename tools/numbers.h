// The numeric flags of the CLI, read strictly: a value that is negative, too large or not a
// number is an error that names the flag and echoes the value, never a silent wrap-around or a
// number read from the front of junk.
#pragma once
#include <cstdint>
#include <string>

namespace gpumemshim::cli {

// Decimal digits only ("4096"), up to UINT64_MAX. `what` names the value in the error:
// "--max-leak-bytes: '-1' is not a byte count". Throws CliError.
uint64_t parse_count(const std::string& flag, const std::string& text, const char* what);

// A percentage >= 0: digits with an optional fraction ("5", "0.5"). Throws CliError.
double parse_percent(const std::string& flag, const std::string& text);

// GPUMEMSHIM_READ_THREADS, when set: a count from 0 to 64 (the threads that decompress a format-3
// trace's blocks). Throws CliError, so that a typo is not silently read as the default.
void check_read_threads_env();

}  // namespace gpumemshim::cli

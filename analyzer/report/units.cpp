#include "gpumemshim/analyzer/units.h"

#include <charconv>
#include <iterator>

#include <fmt/format.h>

namespace gpumemshim::analyzer {

std::string human_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.2f} {}", v, kUnits[u]);
}

// to_chars rather than fmt: reports write a pc for each of tens of thousands of frames.
std::string pc_hex(uint64_t pc) {
  char buf[2 + 16] = {'0', 'x'};
  auto end = std::to_chars(buf + 2, std::end(buf), pc, 16).ptr;
  return std::string(buf, end);
}

}  // namespace gpumemshim::analyzer

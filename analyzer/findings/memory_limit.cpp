#include "findings/memory_limit.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>

namespace gpumemshim::analyzer {

namespace {

// The last value of `key`, or nullopt.
std::optional<std::string_view> last_value(
    const std::vector<std::pair<std::string, std::string>>& attributes, const std::string& key) {
  std::optional<std::string_view> out;
  for (const auto& [k, v] : attributes)
    if (k == key) out = v;
  return out;
}

std::optional<double> parse_fraction(std::string_view s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v <= 0)
    return std::nullopt;
  return v;
}

std::optional<uint64_t> parse_bytes(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v == 0) return std::nullopt;
  return v;
}

}  // namespace

MemoryLimit memory_limit(const std::vector<std::pair<std::string, std::string>>& attributes,
                         int32_t device, uint64_t device_total) {
  MemoryLimit out;
  out.device_total = device_total;
  std::optional<double> fraction;
  if (auto v = last_value(attributes, fmt::format("torch.memory_fraction.{}", device)))
    fraction = parse_fraction(*v);
  if (fraction && *fraction < 1) out.fraction = *fraction;
  // The allocator's own figure is exact; the fraction times the total is how it computes it.
  if (auto v = last_value(attributes, fmt::format("torch.allowed_bytes.{}", device))) {
    std::optional<uint64_t> bytes = parse_bytes(*v);
    // Without a fraction set the observer reports the device total: a cap only when it is less.
    if (bytes && (device_total ? *bytes < device_total : out.fraction > 0)) {
      out.bytes = *bytes;
      return out;
    }
  }
  if (out.fraction > 0 && device_total)
    out.bytes = static_cast<uint64_t>(out.fraction * static_cast<double>(device_total));
  return out;
}

}  // namespace gpumemshim::analyzer

#include "findings/frameworks.h"

#include <fmt/format.h>

#include <optional>
#include <string>

#include "findings/libraries.h"
#include "gpumemshim/analyzer/units.h"

namespace gpumemshim::analyzer {

namespace {

// One XLA allocation at least this share of the device is its preallocated pool (JAX's default
// takes 75 %, XLA_PYTHON_CLIENT_MEM_FRACTION can lower it).
constexpr double kPoolShare = 0.3;

constexpr const char* kPoolMode = "preallocated pool";
constexpr const char* kGrownMode = "pool grown on demand";
constexpr const char* kPlatformMode = "platform allocator";

std::optional<std::string> attribute(const ProcessReport& p, std::string_view key) {
  for (auto it = p.attributes.rbegin(); it != p.attributes.rend(); ++it)
    if (it->first == key) return it->second;
  return std::nullopt;
}

constexpr const char* kPoolHides =
    "the arrays inside the pool: XLA hands them out of its own memory without asking CUDA, so "
    "leaks, growth and peaks of arrays and their Python lines are not in the trace";

std::optional<FrameworkMode> jax_mode(const ProcessReport& p, uint64_t device_total) {
  const std::optional<std::string> allocator = attribute(p, "jax.allocator");
  const std::optional<std::string> preallocate = attribute(p, "jax.preallocate");
  const LibraryMemory* xla = find_library(p, "XLA (jaxlib)");
  if (!allocator && !xla) return std::nullopt;
  FrameworkMode m{"JAX", "", allocator ? "environment" : "allocations", "", ""};
  if (allocator && *allocator == "platform") {
    m.mode = fmt::format("{} (XLA_PYTHON_CLIENT_ALLOCATOR=platform: a CUDA allocation per buffer)",
                         kPlatformMode);
    m.shows =
        "every buffer XLA allocates, with the Python line that made it when the allocating "
        "thread runs Python: leaks, growth and peaks per line";
    return m;
  }
  if (allocator && *allocator == "cuda_async") {
    m.mode = "stream-ordered allocator (XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async)";
    m.shows = "every buffer XLA allocates (cudaMallocAsync), through CUDA's own pool";
    return m;
  }
  if (preallocate && (*preallocate == "false" || *preallocate == "0")) {
    m.mode = fmt::format("{} (XLA_PYTHON_CLIENT_PREALLOCATE=false)", kGrownMode);
    m.shows = "each region the pool adds, at the line that needed it: the pool's growth";
    m.cannot_show = kPoolHides;
    return m;
  }
  if (allocator) {
    const std::string fraction = attribute(p, "jax.mem_fraction").value_or("0.75");
    m.mode =
        fmt::format("{} (JAX's default: {} of the device taken at start)", kPoolMode, fraction);
    m.shows = "the pool's one allocation";
    m.cannot_show = kPoolHides;
    return m;
  }
  // jax was imported without the Python package: judged from XLA's allocations.
  if (xla->peak_bytes && device_total &&
      static_cast<double>(*xla->peak_bytes) >= kPoolShare * static_cast<double>(device_total) &&
      xla->sites <= 2) {
    m.mode = fmt::format("{} (inferred: XLA held {} of the device's {})", kPoolMode,
                         human_bytes(*xla->peak_bytes), human_bytes(device_total));
    m.shows = "the pool's allocation";
    m.cannot_show = kPoolHides;
    return m;
  }
  m.mode = "unknown (jax was not seen imported: the allocator's settings are not in the trace)";
  m.shows = "XLA's allocations as the by-library table lists them";
  return m;
}

}  // namespace

std::vector<FrameworkMode> find_framework_modes(const ProcessReport& p, uint64_t device_total) {
  std::vector<FrameworkMode> out;
  if (auto jax = jax_mode(p, device_total)) out.push_back(std::move(*jax));
  if (find_library(p, kCupyPool))
    out.push_back(
        {"CuPy", "memory pool (CuPy's default)", "allocations",
         "each segment the pool asks CUDA for, at the Python line that needed it: arrays "
         "kept step after step show as growth there",
         "which of the pool's blocks arrays still use: the pool keeps freed blocks, so its "
         "segments alive at exit are reported as cached, not as leaks"});
  return out;
}

void advise_framework_modes(const ProcessReport& p, std::vector<Advice>& out) {
  for (const FrameworkMode& m : p.frameworks) {
    if (m.framework != "JAX" || m.cannot_show.empty()) continue;
    out.push_back({"jax-platform-allocator", "Let JAX allocate each buffer from CUDA",
                   "JAX's pool hides its arrays from the trace. For the diagnosis run, set "
                   "XLA_PYTHON_CLIENT_PREALLOCATE=false and XLA_PYTHON_CLIENT_ALLOCATOR=platform "
                   "before jax starts: every buffer is then a CUDA allocation with its Python line "
                   "(slower; not for production).",
                   "xla:" + std::to_string(p.info.pid),
                   fmt::format("JAX's allocator here: {}", m.mode)});
  }
}

}  // namespace gpumemshim::analyzer

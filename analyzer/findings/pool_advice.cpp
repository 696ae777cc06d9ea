#include "findings/pool_advice.h"

#include <fmt/format.h>

#include <algorithm>

#include "findings/advice.h"
#include "findings/libraries.h"
#include "gpumemshim/analyzer/report.h"
#include "gpumemshim/analyzer/units.h"

namespace gpumemshim::analyzer {

namespace {

// A pool worth advising on holds at least this much at the peak, and at least this share of it.
constexpr uint64_t kLargePool = 64ull << 20;
constexpr double kPoolShare = 0.25;
// cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY are both 2.
constexpr uint32_t kOutOfMemory = 2;

}  // namespace

void advise_cupy_pool(const ProcessReport& p, uint64_t capacity, std::vector<Advice>& out) {
  const LibraryMemory* pool = find_library(p, kCupyPool);
  if (!pool) return;
  const uint64_t peak = p.summary.peak_bytes;
  const uint64_t held = pool->at_peak_bytes;
  if (held < kLargePool || static_cast<double>(held) < kPoolShare * static_cast<double>(peak))
    return;
  auto oom = std::find_if(p.failures.begin(), p.failures.end(),
                          [](const Failure& f) { return f.event.error == kOutOfMemory; });
  const bool near =
      capacity && static_cast<double>(peak) >= kNearCapacity * static_cast<double>(capacity);
  if (!near && oom == p.failures.end()) return;
  std::string evidence =
      fmt::format("CuPy's memory pool held {} of the {} live at the peak ({:.0f}%)",
                  human_bytes(held), human_bytes(peak), pct(held, peak));
  if (capacity)
    evidence += fmt::format("; the peak is {:.0f}% of the {} the process may use",
                            pct(peak, capacity), human_bytes(capacity));
  if (oom != p.failures.end())
    evidence += fmt::format("; an allocation of {} via {} failed for lack of memory at {:.3f} s",
                            human_bytes(oom->event.size), format::api_name(oom->event.api),
                            static_cast<double>(oom->event.time_ns) / 1e9);
  out.push_back(
      {"cupy-free-all-blocks", "Give CuPy's cached blocks back to the device",
       "CuPy's memory pool keeps every block its arrays free for CuPy's next arrays; nothing "
       "else in the process (PyTorch, cuBLAS, NCCL) or on the device can use it. Call "
       "cupy.get_default_memory_pool().free_all_blocks() after the phase that needed the "
       "memory, or cap the pool with cupy.get_default_memory_pool().set_limit(size=...).",
       "peak:" + std::to_string(p.info.pid), evidence});
}

}  // namespace gpumemshim::analyzer

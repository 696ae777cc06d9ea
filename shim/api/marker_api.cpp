#include "marker_api.h"

#include <atomic>
#include <cstring>

#include "../record/recorder.h"
#include "marker_name.h"
#include "step_source.h"

namespace gpumemshim::shim {
namespace {

constexpr char kRegionPrefix[] = "expect_no_leak:";
constexpr size_t kMaxName = kMaxMarkerName;

// "expect_no_leak:<name>" into `buf` (sizeof kRegionPrefix + kMaxName bytes).
const char* region_name(const char* name, char* buf) {
  constexpr size_t prefix = sizeof kRegionPrefix - 1;
  std::memcpy(buf, kRegionPrefix, prefix);
  size_t n = name ? strnlen(name, kMaxName) : 0;
  if (n) std::memcpy(buf + prefix, name, n);
  buf[prefix + n] = '\0';
  return buf;
}

// A marker whose name is cut to kMaxName bytes.
void record_named(format::MarkerKind kind, const char* name) {
  char buf[kMaxName + 1];
  record_marker(kind, cut_marker_name(name, buf));
}

std::atomic<int> g_step_source{0};  // the best StepSource that has marked a step

}  // namespace

void record_step(StepSource source, const char* name) {
  int want = static_cast<int>(source);
  int cur = g_step_source.load(std::memory_order_relaxed);
  while (cur < want && !g_step_source.compare_exchange_weak(cur, want, std::memory_order_relaxed)) {
  }
  if (want < g_step_source.load(std::memory_order_relaxed)) return;
  record_named(format::MarkerKind::kStep, name);
}

bool is_step_name(const char* name) {
  if (!name) return false;
  static constexpr const char* kPrefixes[] = {"step", "iter", "batch", "train_step", "training_step"};
  for (const char* prefix : kPrefixes) {
    size_t i = 0;
    for (; prefix[i]; ++i) {
      char c = name[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != prefix[i]) break;
    }
    if (!prefix[i]) return true;
  }
  return false;
}

}  // namespace gpumemshim::shim

using gpumemshim::format::MarkerKind;
namespace shim = gpumemshim::shim;

GPUMEMSHIM_API void gpumemshim_mark(const char* name) {
  if (!shim::recording_off()) shim::record_named(MarkerKind::kMark, name);
}

GPUMEMSHIM_API void gpumemshim_step(const char* name) {
  if (shim::recording_off()) return;
  bool optimizer = name && std::strcmp(name, "optimizer.step") == 0;  // the package's torch hook
  shim::record_step(optimizer ? shim::StepSource::kOptimizer : shim::StepSource::kProgram, name);
}

GPUMEMSHIM_API void gpumemshim_region_begin(const char* name) {
  if (shim::recording_off()) return;
  char buf[sizeof shim::kRegionPrefix + shim::kMaxName];
  shim::record_marker(MarkerKind::kRangePush, shim::region_name(name, buf));
}

GPUMEMSHIM_API void gpumemshim_region_end(const char* name) {
  if (shim::recording_off()) return;
  char buf[sizeof shim::kRegionPrefix + shim::kMaxName];
  shim::record_marker(MarkerKind::kRangePop, shim::region_name(name, buf));
}

GPUMEMSHIM_API void gpumemshim_range_push(const char* name) {
  if (!shim::recording_off()) shim::record_named(MarkerKind::kRangePush, name);
}

GPUMEMSHIM_API void gpumemshim_range_pop(const char* name) {
  if (!shim::recording_off()) shim::record_named(MarkerKind::kRangePop, name);
}

GPUMEMSHIM_API void gpumemshim_attribute(const char* key, const char* value) {
  if (!shim::recording_off()) shim::record_attribute(key, value);
}

GPUMEMSHIM_API int gpumemshim_active(void) { return shim::recording_off() ? 0 : 1; }

GPUMEMSHIM_API void gpumemshim_pause(int paused) {
  if (shim::recording_off()) return;
  shim::set_paused(paused != 0);
}

GPUMEMSHIM_API void gpumemshim_flush(void) {
  if (shim::recording_off()) return;
  shim::flush_all_threads();
}

// The replay's vocabulary beside the typed report's structs: the marker log a trace keeps and the
// memory-kind classes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpumemshim/analyzer/report.h"
#include "gpumemshim/format/records.h"
#include "symbolize/symbolizer.h"

namespace gpumemshim::analyzer {

// The markers of one trace: every one counted, the earliest kKeep (by time) kept, so memory stays
// bounded however many markers a long run writes.
class MarkerLog {
 public:
  static constexpr size_t kKeep = 10000;
  void add(const format::MarkerRecord& r);
  // The kept markers in time order (ties: file order).
  std::vector<MarkerEvent> sorted() const;
  uint64_t total() const { return total_; }
  uint64_t range_pushes() const { return range_pushes_; }
  uint64_t dropped() const { return total_ - kept_.size(); }

 private:
  std::vector<MarkerEvent> kept_;  // a max-heap by (time, seq) once kKeep are kept
  uint64_t total_ = 0;
  uint64_t range_pushes_ = 0;
};

// True when the module's file name starts with "libgpumemshim": the shim's own frames, never shown.
inline bool is_shim_module(const std::string& path) {
  const std::string_view p = path;
  const size_t slash = p.rfind('/');
  return p.substr(slash == std::string_view::npos ? 0 : slash + 1).starts_with("libgpumemshim");
}

// True for kinds that are memory (leakable); false for address-space kinds.
bool is_memory_kind(MemoryKind kind);
// True for kinds counted in peak device bytes (inline: the replay asks for every event).
inline bool is_device_memory_kind(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kDevice:
    case MemoryKind::kManaged:
    case MemoryKind::kPool:
    case MemoryKind::kPhysical: return true;
    default: return false;
  }
}

}  // namespace gpumemshim::analyzer

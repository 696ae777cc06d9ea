#include "gpumemshim/analyzer/errors.h"

#include "replay/model.h"

namespace gpumemshim::analyzer {

void throw_trace_error(const std::string& file, const std::string& reason) {
  throw TraceError(file + ": " + reason);
}

bool is_memory_kind(MemoryKind kind) {
  return kind != MemoryKind::kMapping && kind != MemoryKind::kReservation;
}

uint64_t TraceStats::events() const {
  using format::RecordType;
  auto n = [&](RecordType t) { return by_type[static_cast<uint8_t>(t)]; };
  return n(RecordType::kAlloc) + n(RecordType::kFree) + n(RecordType::kAllocFailed) +
         n(RecordType::kMemInfo) + n(RecordType::kMarker) + n(RecordType::kTorchEvent);
}

}  // namespace gpumemshim::analyzer

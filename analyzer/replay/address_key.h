// The table a live allocation's address is looked up in: the replay keeps one per address class.
// Device, managed and pool addresses share one (cudaFree frees any of them); pinned host memory,
// VMM physical handles, mappings and reservations each have their own.
#pragma once
#include <cstddef>
#include <cstdint>

#include "gpumemshim/format/records.h"

namespace gpumemshim::analyzer {

inline uint8_t address_class(format::MemoryKind kind) {
  switch (kind) {
    case format::MemoryKind::kDevice:
    case format::MemoryKind::kManaged:
    case format::MemoryKind::kPool: return 0;
    case format::MemoryKind::kPinnedHost: return 1;
    case format::MemoryKind::kPhysical: return 2;
    case format::MemoryKind::kMapping: return 3;
    case format::MemoryKind::kReservation: return 4;
  }
  return 5;
}
inline constexpr size_t kAddressClasses = 6;  // address_class's values

}  // namespace gpumemshim::analyzer

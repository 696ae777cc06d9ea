// The key of a live allocation, shared by the replay and the timeline: an address within its
// table. Device, managed and pool addresses share one table (cudaFree frees any of them); pinned
// host memory, VMM physical handles, mappings and reservations each have their own.
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

struct AddressKey {
  uint64_t address;
  uint8_t cls;  // address_class of the allocation's memory kind
  bool operator==(const AddressKey&) const = default;
};

struct AddressKeyHash {
  size_t operator()(const AddressKey& k) const noexcept {
    return static_cast<size_t>((k.address ^ (uint64_t{k.cls} << 59)) * 0x9E3779B97F4A7C15ull);
  }
};

}  // namespace gpumemshim::analyzer

// VMM physical memory (cuMemCreate) stays allocated until it is both released (cuMemRelease) and
// unmapped everywhere: CUDA's own idiom releases a handle right after mapping it and goes on using
// the memory through the mapping. The replay keeps a released handle's record live while a mapping
// holds it; this table knows which handle each live mapping maps and how many mappings each handle
// has. A mapping names its handle in its record's stream field; a trace without it (stream 0) keeps
// the older accounting, where a release frees at once.
#pragma once
#include <cstddef>
#include <cstdint>

#include "replay/flat_map.h"

namespace gpumemshim::analyzer {

class VmmHandles {
 public:
  enum class Release : uint8_t {
    kFree,   // no mapping holds it: freed now
    kKeep,   // released, still mapped: alive until its last mapping goes
    kAgain,  // released before and still mapped: a second release frees nothing
  };

  // A cuMemMap of a live handle at `address`.
  void map(uint64_t address, uint64_t handle) {
    *mapping_handle_.try_emplace(address).first = handle;
    ++handles_.try_emplace(handle).first->mappings;
  }

  // A cuMemUnmap of the mapping at `address`: the handle to free now (released, and this was its
  // last mapping), else 0.
  uint64_t unmap(uint64_t address) {
    const size_t m = mapping_handle_.find_slot(address);
    if (m == kNone) return 0;
    const uint64_t handle = mapping_handle_.at_slot(m);
    mapping_handle_.erase_slot(m);
    const size_t h = handles_.find_slot(handle);
    if (h == kNone) return 0;
    State& s = handles_.at_slot(h);
    if (--s.mappings != 0) return 0;
    const bool released = s.released;
    handles_.erase_slot(h);
    return released ? handle : 0;
  }

  Release release(uint64_t handle) {
    State* s = handles_.find(handle);
    if (s == nullptr) return Release::kFree;
    if (s->released) return Release::kAgain;
    s->released = true;
    return Release::kKeep;
  }

  // The handle's record was replaced (its release was missed): its mappings hold it no more.
  void replaced(uint64_t handle) { handles_.erase(handle); }

  bool released(uint64_t handle) const {
    const State* s = handles_.find(handle);
    return s != nullptr && s->released;
  }
  bool any_released() const {
    bool any = false;
    handles_.for_each([&](uint64_t, const State& s) { any |= s.released; });
    return any;
  }
  // f(mapping address, handle) for every live mapping of a known handle.
  template <typename F>
  void for_each_mapping(F&& f) const {
    mapping_handle_.for_each(f);
  }

 private:
  struct State {
    uint32_t mappings = 0;
    bool released = false;
  };
  struct Hash {  // FlatMap::hash mixes the bits itself
    size_t operator()(uint64_t a) const noexcept { return static_cast<size_t>(a); }
  };
  static constexpr size_t kNone = FlatMap<uint64_t, State, Hash>::kNone;
  FlatMap<uint64_t, uint64_t, Hash> mapping_handle_;  // live mapping -> the handle it maps
  FlatMap<uint64_t, State, Hash> handles_;            // handles with live mappings
};

}  // namespace gpumemshim::analyzer

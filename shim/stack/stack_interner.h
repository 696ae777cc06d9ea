// Per-thread memory of stacks already written: each unique stack goes into the trace once per
// thread. The id is the stack's hash, so threads never need to agree on ids.
#pragma once
#include <cstdint>

namespace gpumemshim::shim {

class StackInterner {
 public:
  static uint64_t hash(const uint64_t* frames, uint32_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (uint32_t i = 0; i < n; ++i) {
      h ^= frames[i];
      h *= 0xff51afd7ed558ccdull;
      h ^= h >> 32;
    }
    return h ? h : 1;  // 0 means "no stack" in the format
  }

  // True if the id was already known; otherwise remembers it and returns false.
  bool seen_or_insert(uint64_t id) {
    if (used_ * 4 >= kSlots * 3) clear();  // full: forget, the cost is re-emitting some stacks
    uint32_t i = static_cast<uint32_t>(id) & (kSlots - 1);
    for (;;) {
      if (slots_[i] == id) return true;
      if (slots_[i] == 0) {
        slots_[i] = id;
        ++used_;
        return false;
      }
      i = (i + 1) & (kSlots - 1);
    }
  }

  void clear() {
    for (auto& s : slots_) s = 0;
    used_ = 0;
  }

 private:
  static constexpr uint32_t kSlots = 8192;
  uint64_t slots_[kSlots] = {};
  uint32_t used_ = 0;
};

}  // namespace gpumemshim::shim

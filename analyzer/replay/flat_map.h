// An open-addressing hash map for the replay's hot tables (live allocations by address, stream
// ids): one flat array, linear probing, deletion by backward shift (no tombstones), so an
// alloc/free pair costs no node allocation and a lookup touches one or two cache lines. Each slot
// keeps its distance from home, so an erase moves the rest of its run back without hashing them
// again (16-byte slots for 8-byte keys and 4-byte values). A caller looking a key up in several
// maps hashes it once (hash(), then the calls that take it). Pointers to values are valid until
// the next insert or erase.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpumemshim::analyzer {

template <typename Key, typename Value, typename Hash>
class FlatMap {
 public:
  FlatMap() : slots_(16), mask_(15) {}

  // Mixed: keys like 2 MiB-aligned addresses share their low bits.
  static uint64_t hash(const Key& k) {
    uint64_t h = static_cast<uint64_t>(Hash{}(k));
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 29);
  }

  Value* find(const Key& k) {
    const size_t i = find_slot(k);
    return i == kNone ? nullptr : &slots_[i].value;
  }
  const Value* find(const Key& k) const { return const_cast<FlatMap*>(this)->find(k); }

  // The value of k, value-initialized when it was not there; second: whether it was inserted.
  std::pair<Value*, bool> try_emplace(const Key& k) { return try_emplace(k, hash(k)); }
  std::pair<Value*, bool> try_emplace(const Key& k, uint64_t h) {
    if (size_ == grow_at_) [[unlikely]] grow();
    uint32_t dist = 1;
    for (size_t i = h & mask_;; i = (i + 1) & mask_, ++dist) {
      Slot& s = slots_[i];
      if (s.dist == 0) {
        s.key = k;
        s.value = Value{};
        s.dist = dist;
        ++size_;
        return {&s.value, true};
      }
      if (s.key == k) return {&s.value, false};
    }
  }

  bool erase(const Key& k) {
    const size_t i = find_slot(k);
    if (i == kNone) return false;
    erase_slot(i);
    return true;
  }

  // Where k lives (kNone: absent), for a lookup and an erase with one probe.
  static constexpr size_t kNone = SIZE_MAX;
  size_t find_slot(const Key& k) const { return find_slot(k, hash(k)); }
  size_t find_slot(const Key& k, uint64_t h) const {
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.dist == 0) return kNone;
      if (s.key == k) return i;
    }
  }
  Value& at_slot(size_t i) { return slots_[i].value; }
  const Value& at_slot(size_t i) const { return slots_[i].value; }

  // Backward shift: each later member of the run moves into the hole when its home allows (its
  // distance from home covers the gap).
  void erase_slot(size_t i) {
    for (size_t j = (i + 1) & mask_; slots_[j].dist != 0; j = (j + 1) & mask_) {
      const auto gap = static_cast<uint32_t>((j - i) & mask_);
      if (slots_[j].dist > gap) {
        slots_[i] = std::move(slots_[j]);
        slots_[i].dist -= gap;
        i = j;
      }
    }
    slots_[i].dist = 0;
    --size_;
  }

  // Empties the map, keeping its slots (a map refilled to about the same size every time).
  void clear() {
    for (Slot& s : slots_) s.dist = 0;
    size_ = 0;
  }

  size_t size() const { return size_; }
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.dist != 0) f(s.key, s.value);
  }
  // The values may change, not the keys.
  template <typename F>
  void for_each_value(F&& f) {
    for (Slot& s : slots_)
      if (s.dist != 0) f(s.value);
  }

 private:
  // A slot of more than half a cache line gets a whole one: a probe then reads one line, where
  // 48-byte slots would straddle two for every other slot.
  static constexpr size_t kSlotAlign = sizeof(Key) + sizeof(Value) + sizeof(uint32_t) > 32
                                           ? 64
                                           : alignof(Key);
  struct alignas(kSlotAlign) Slot {
    Key key{};
    Value value{};
    uint32_t dist = 0;  // 0: empty; else 1 + how far past its home slot it lies
  };
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    grow_at_ = slots_.size() / 2;
    size_ = 0;
    for (Slot& s : old)
      if (s.dist != 0) *try_emplace(s.key).first = std::move(s.value);
  }

  std::vector<Slot> slots_;
  size_t mask_;  // kept: the slots' count is a load and a shift away
  size_t size_ = 0;
  size_t grow_at_ = 8;  // the size at which an insert doubles the slots first: at most half full
};

}  // namespace gpumemshim::analyzer

// An open-addressing hash map for the replay's hot tables (live allocations by address): one flat
// array, linear probing, deletion by backward shift (no tombstones), so an alloc/free pair costs
// no node allocation and a lookup touches one or two cache lines. Pointers to values are valid
// until the next insert or erase.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpumemshim::analyzer {

template <typename Key, typename Value, typename Hash>
class FlatMap {
 public:
  FlatMap() { slots_.resize(16); }

  Value* find(const Key& k) {
    for (size_t i = index(k);; i = (i + 1) & mask()) {
      Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.key == k) return &s.value;
    }
  }
  const Value* find(const Key& k) const { return const_cast<FlatMap*>(this)->find(k); }

  // The value of k, value-initialized when it was not there; second: whether it was inserted.
  std::pair<Value*, bool> try_emplace(const Key& k) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    for (size_t i = index(k);; i = (i + 1) & mask()) {
      Slot& s = slots_[i];
      if (!s.used) {
        s.used = true;
        s.key = k;
        s.value = Value{};
        ++size_;
        return {&s.value, true};
      }
      if (s.key == k) return {&s.value, false};
    }
  }

  bool erase(const Key& k) {
    size_t i = index(k);
    for (;; i = (i + 1) & mask()) {
      if (!slots_[i].used) return false;
      if (slots_[i].key == k) break;
    }
    erase_slot(i);
    return true;
  }

  // Where k lives (kNone: absent), for a lookup and an erase with one probe.
  static constexpr size_t kNone = SIZE_MAX;
  size_t find_slot(const Key& k) const {
    for (size_t i = index(k);; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (!s.used) return kNone;
      if (s.key == k) return i;
    }
  }
  Value& at_slot(size_t i) { return slots_[i].value; }

  void erase_slot(size_t i) {
    // Backward shift: move later members of the probe run into the hole when their home allows.
    for (size_t j = (i + 1) & mask();; j = (j + 1) & mask()) {
      Slot& s = slots_[j];
      if (!s.used) break;
      size_t home = index(s.key);
      bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
      if (movable) {
        slots_[i] = std::move(s);
        i = j;
      }
    }
    slots_[i].used = false;
    --size_;
  }

  // Empties the map, keeping its slots (a map refilled to about the same size every time).
  void clear() {
    for (Slot& s : slots_) s.used = false;
    size_ = 0;
  }

  size_t size() const { return size_; }
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.used) f(s.key, s.value);
  }

 private:
  struct Slot {
    Key key{};
    Value value{};
    bool used = false;
  };
  size_t mask() const { return slots_.size() - 1; }
  size_t index(const Key& k) const {  // mixed: keys like 2 MiB-aligned addresses share low bits
    uint64_t h = static_cast<uint64_t>(Hash{}(k));
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return static_cast<size_t>(h) & mask();
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    size_ = 0;
    for (Slot& s : old)
      if (s.used) *try_emplace(s.key).first = std::move(s.value);
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace gpumemshim::analyzer

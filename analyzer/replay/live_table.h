// The replay's live allocations by key: open-addressing maps whose slots hold the records
// themselves (a free finds its record in the slot it probes, not behind a second load).
//
// The index is generational. Most allocations are freed soon; a few live for the whole run
// (weights, caches, leaks), and in one table a trace that leaks tens of thousands of them would
// spread the busy few hundred keys over a megabyte of index, a cache miss per free. New keys go to
// a young map, each tagged with its generation; every `period` inserts a generation ends, and the
// keys of the one before it still alive (two generations old) move to the old map, which a bitmap
// of its keys' hashes lets most lookups skip. An allocation thus probes one small busy map (the
// previous generation in a map of its own would cost a second probe for every new key). Same
// interface as FlatMap's for the calls the replay makes; a slot number names its map in its top
// bit.
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "replay/flat_map.h"

namespace gpumemshim::analyzer {

template <typename Key, typename Record, typename Hash>
class LiveTable {
  // The record and the generation its key was inserted in: 4 more bytes, in the padding of a slot
  // of an 8-byte key and a 32-byte record (FlatMap gives such a slot a whole cache line).
  struct Entry {
    Record record;
    uint32_t generation;
  };
  // Key -> entry; a key is hashed once (FlatMap::hash) for both maps.
  using Index = FlatMap<Key, Entry, Hash>;

 public:
  static constexpr size_t kDefaultPeriod = 8192;  // inserts per generation
  explicit LiveTable(size_t period = kDefaultPeriod) : period_(std::max<size_t>(period, 1)) {}

  // The record of k; second: whether k was inserted (value-initialized). Pointers stay valid
  // until the next insert or erase. Inline, as are the lookup and the erase: one call per event.
  [[gnu::always_inline]] std::pair<Record*, bool> try_emplace(const Key& k) {
    const uint64_t h = Index::hash(k);
    if (const size_t old = find_old(k, h); old != kNone) return {&at_slot(old), false};
    auto [entry, inserted] = young_.try_emplace(k, h);
    if (inserted) {
      entry->generation = generation_;
      if (++inserts_ == period_) [[unlikely]] {
        age();  // records may move
        return {&at_slot(find_slot(k)), true};
      }
    }
    return {&entry->record, inserted};
  }

  static constexpr size_t kNone = Index::kNone;
  [[gnu::always_inline]] size_t find_slot(const Key& k) const {
    const uint64_t h = Index::hash(k);
    if (const size_t s = young_.find_slot(k, h); s != kNone) return s;
    return find_old(k, h);
  }
  Record& at_slot(size_t slot) { return map_of(slot).at_slot(slot & kSlotMask).record; }
  [[gnu::always_inline]] void erase_slot(size_t slot) { map_of(slot).erase_slot(slot & kSlotMask); }

  size_t size() const { return young_.size() + old_.size(); }
  template <typename F>
  void for_each(F&& f) const {
    for (const Index* m : {&young_, &old_})
      m->for_each([&](const Key& k, const Entry& e) { f(k, e.record); });
  }
  // Every record, to change in place.
  template <typename F>
  void for_each_record(F&& f) {
    for (Index* m : {&young_, &old_}) m->for_each_value([&](Entry& e) { f(e.record); });
  }

 private:
  // Slot numbers of the old map have the top bit set.
  static constexpr size_t kOldSlot = size_t{1} << 63;
  static constexpr size_t kSlotMask = kOldSlot - 1;
  Index& map_of(size_t slot) { return (slot & kOldSlot) ? old_ : young_; }

  size_t find_old(const Key& k, uint64_t h) const {
    if (old_.size() == 0 || !maybe_old(h)) return kNone;
    if (const size_t s = old_.find_slot(k, h); s != kNone) return s | kOldSlot;
    return kNone;
  }

  // The old map's keys as bits of their hash (never cleared on erase: rebuilt when stale). The
  // hash's high half: its low bits pick the slots.
  uint64_t old_bit(uint64_t h) const { return (h >> 32) & (old_bits_.size() * 64 - 1); }
  bool maybe_old(uint64_t h) const {
    const uint64_t bit = old_bit(h);
    return (old_bits_[bit >> 6] >> (bit & 63)) & 1;
  }
  void mark_old(uint64_t h) {
    const uint64_t bit = old_bit(h);
    old_bits_[bit >> 6] |= uint64_t{1} << (bit & 63);
  }

  // A generation ends: the young keys of the generation before it still alive are old now.
  void age() {
    inserts_ = 0;
    moving_.clear();
    young_.for_each([&](const Key& k, const Entry& e) {
      if (e.generation != generation_) moving_.emplace_back(k, e.record);
    });
    ++generation_;
    const size_t old_keys = old_.size() + moving_.size(), marked = marked_ + moving_.size();
    // Eight bits per old key, and no more stale bits than live ones: else rebuilt. At most 2^32
    // bits (the hash's high half).
    const bool rebuild = (old_bits_.size() * 64 < 8 * old_keys && old_bits_.size() < (size_t{1} << 26)) ||
                         marked > 2 * old_keys + 4096;
    for (const auto& [k, record] : moving_) {
      const uint64_t h = Index::hash(k);
      young_.erase_slot(young_.find_slot(k, h));
      *old_.try_emplace(k, h).first = Entry{record, 0};
      if (!rebuild) mark_old(h);
    }
    marked_ = marked;
    if (rebuild) {
      old_bits_.assign(std::min<size_t>(size_t{1} << 26, std::max<size_t>(512, std::bit_ceil(8 * old_keys) / 64)), 0);
      old_.for_each([&](const Key& k, const Entry&) { mark_old(Index::hash(k)); });
      marked_ = old_keys;
    }
  }

  size_t period_;
  size_t inserts_ = 0;       // into the young map since the last generation ended
  uint32_t generation_ = 0;  // the young keys' newest (wraps: only equality is asked)
  Index young_, old_;
  std::vector<std::pair<Key, Record>> moving_;                      // age()'s
  // Made by the first age() that has keys to move (at least 32 Kibit): no table before that
  // looks at it (find_old asks old_ first), and most tables of a small trace never age.
  std::vector<uint64_t> old_bits_;
  size_t marked_ = 0;  // keys marked in old_bits_ since it was built (erased ones stay marked)
};

}  // namespace gpumemshim::analyzer

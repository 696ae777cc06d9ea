// The replay's live allocations by key: open-addressing maps whose slots hold the records
// themselves (a free finds its record in the slot it probes, not behind a second load).
//
// The index is generational. Most allocations are freed soon; a few live for the whole run
// (weights, caches, leaks), and a trace that leaks tens of thousands of them used to spread the
// busy few hundred keys over a megabyte of index, a cache miss per free (measured: the 50 M
// benchmark trace without its 25 k leaks loads 21 % faster). New keys go to a young map; every
// `period` inserts the keys still in the previous young map move to the old map and the young one
// becomes the previous one. Lookups try young, then previous (both small and busy), then old, which
// a bitmap of its keys' hashes lets most lookups skip. Same interface as FlatMap's for the calls
// the replay makes; a slot number names its map in its top two bits.
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "gpumemshim/analyzer/flat_map.h"

namespace gpumemshim::analyzer {

template <typename Key, typename Record, typename Hash>
class LiveTable {
  // Key -> record; a key is hashed once (FlatMap::hash) for all three maps.
  using Index = FlatMap<Key, Record, Hash>;

 public:
  static constexpr size_t kDefaultPeriod = 8192;  // inserts per generation
  explicit LiveTable(size_t period = kDefaultPeriod) : period_(std::max<size_t>(period, 1)) {}

  // The record of k; second: whether k was inserted (value-initialized). Pointers stay valid
  // until the next insert or erase. Inline, as are the lookup and the erase: one call per event.
  [[gnu::always_inline]] std::pair<Record*, bool> try_emplace(const Key& k) {
    const uint64_t h = Index::hash(k);
    if (const size_t older = find_older(k, h); older != kNone) return {&at_slot(older), false};
    auto inserted = maps_[kYoung].try_emplace(k, h);
    if (inserted.second && ++inserts_ == period_) [[unlikely]] {
      age();  // the young map is emptied: the record moves
      return {&at_slot(find_older(k, h)), true};
    }
    return inserted;
  }

  static constexpr size_t kNone = Index::kNone;
  [[gnu::always_inline]] size_t find_slot(const Key& k) const {
    const uint64_t h = Index::hash(k);
    if (const size_t s = maps_[kYoung].find_slot(k, h); s != kNone) return s;
    return find_older(k, h);
  }
  Record& at_slot(size_t slot) { return maps_[slot >> kMapShift].at_slot(slot & kSlotMask); }
  [[gnu::always_inline]] void erase_slot(size_t slot) {
    maps_[slot >> kMapShift].erase_slot(slot & kSlotMask);
  }

  size_t size() const { return maps_[kYoung].size() + maps_[kPrevious].size() + maps_[kOld].size(); }
  template <typename F>
  void for_each(F&& f) const {
    for (const Index& m : maps_) m.for_each(f);
  }

 private:
  // Slot numbers name their map in the top two bits.
  static constexpr int kMapShift = 62;
  static constexpr size_t kSlotMask = (size_t{1} << kMapShift) - 1;
  static constexpr size_t kYoung = 0, kPrevious = 1, kOld = 2;

  size_t find_older(const Key& k, uint64_t h) const {
    if (const size_t s = maps_[kPrevious].find_slot(k, h); s != kNone) return s | (kPrevious << kMapShift);
    if (maps_[kOld].size() == 0 || !maybe_old(h)) return kNone;
    if (const size_t s = maps_[kOld].find_slot(k, h); s != kNone) return s | (kOld << kMapShift);
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

  // A generation ends: the previous young keys still alive are old now.
  void age() {
    inserts_ = 0;
    Index &young = maps_[kYoung], &previous = maps_[kPrevious], &old = maps_[kOld];
    const size_t old_keys = old.size() + previous.size(), marked = marked_ + previous.size();
    // Eight bits per old key, and no more stale bits than live ones: else rebuilt. At most 2^32
    // bits (the hash's high half).
    const bool rebuild = (old_bits_.size() * 64 < 8 * old_keys && old_bits_.size() < (size_t{1} << 26)) ||
                         marked > 2 * old_keys + 4096;
    previous.for_each([&](const Key& k, const Record& record) {
      const uint64_t h = Index::hash(k);
      *old.try_emplace(k, h).first = record;
      if (!rebuild) mark_old(h);
    });
    marked_ = marked;
    if (rebuild) {
      old_bits_.assign(std::min<size_t>(size_t{1} << 26, std::max<size_t>(512, std::bit_ceil(8 * old_keys) / 64)), 0);
      old.for_each([&](const Key& k, const Record&) { mark_old(Index::hash(k)); });
      marked_ = old_keys;
    }
    std::swap(previous, young);
    young.clear();
  }

  size_t period_;
  size_t inserts_ = 0;  // into the young map since the last generation
  Index maps_[3];       // young, previous, old
  std::vector<uint64_t> old_bits_ = std::vector<uint64_t>(512, 0);  // 32 Kibit to start
  size_t marked_ = 0;  // keys marked in old_bits_ since it was built (erased ones stay marked)
};

}  // namespace gpumemshim::analyzer

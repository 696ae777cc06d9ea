// The replay's live allocations by key: an open-addressing index of small slots (key -> record
// number) and the records themselves in a dense array whose freed entries are reused
// last-freed-first (a record of up to 64 bytes aligned to its power-of-two size: one cache line).
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
  using Index = FlatMap<Key, uint32_t, Hash>;

 public:
  static constexpr size_t kDefaultPeriod = 8192;  // inserts per generation
  explicit LiveTable(size_t period = kDefaultPeriod) : period_(std::max<size_t>(period, 1)) {}

  // The record of k, value-initialized when it was not there; second: whether it was inserted.
  // Pointers stay valid until the next insert or erase.
  std::pair<Record*, bool> try_emplace(const Key& k) {
    if (const size_t older = find_older(k); older != kNone) return {&at_slot(older), false};
    auto [number, inserted] = young_.try_emplace(k);
    if (!inserted) return {&records_[*number].record, false};
    uint32_t n;
    if (free_.empty()) {
      n = static_cast<uint32_t>(records_.size());
      records_.emplace_back();
    } else {
      n = free_.back();
      free_.pop_back();
      records_[n].record = Record{};
    }
    *number = n;
    if (++inserts_ == period_) age();  // moves index entries, not records
    return {&records_[n].record, true};
  }

  static constexpr size_t kNone = Index::kNone;
  size_t find_slot(const Key& k) const {
    if (const size_t s = young_.find_slot(k); s != kNone) return s;
    return find_older(k);
  }
  Record& at_slot(size_t slot) { return records_[map(slot).at_slot(slot & kSlotMask)].record; }
  void erase_slot(size_t slot) {
    Index& m = map(slot);
    free_.push_back(m.at_slot(slot & kSlotMask));
    m.erase_slot(slot & kSlotMask);
  }

  size_t size() const { return young_.size() + previous_.size() + old_.size(); }
  template <typename F>
  void for_each(F&& f) const {
    for (const Index* m : {&young_, &previous_, &old_})
      m->for_each([&](const Key& k, uint32_t number) { f(k, records_[number].record); });
  }

 private:
  static constexpr int kMapShift = 62;
  static constexpr size_t kSlotMask = (size_t{1} << kMapShift) - 1;
  static constexpr size_t kPrevious = size_t{1} << kMapShift, kOld = size_t{2} << kMapShift;
  Index& map(size_t slot) { return slot >= kOld ? old_ : slot >= kPrevious ? previous_ : young_; }

  size_t find_older(const Key& k) const {
    if (const size_t s = previous_.find_slot(k); s != kNone) return s | kPrevious;
    if (old_.size() == 0 || !maybe_old(k)) return kNone;
    if (const size_t s = old_.find_slot(k); s != kNone) return s | kOld;
    return kNone;
  }

  // The old map's keys as bits of their hash (never cleared on erase: rebuilt when stale).
  static uint64_t mix(const Key& k) {
    uint64_t h = static_cast<uint64_t>(Hash{}(k)) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
  }
  uint64_t old_bit(const Key& k) const { return mix(k) & (old_bits_.size() * 64 - 1); }
  bool maybe_old(const Key& k) const {
    const uint64_t bit = old_bit(k);
    return (old_bits_[bit >> 6] >> (bit & 63)) & 1;
  }
  void mark_old(const Key& k) {
    const uint64_t bit = old_bit(k);
    old_bits_[bit >> 6] |= uint64_t{1} << (bit & 63);
  }

  // A generation ends: the previous young keys still alive are old now.
  void age() {
    inserts_ = 0;
    const size_t old_keys = old_.size() + previous_.size(), marked = marked_ + previous_.size();
    // Eight bits per old key, and no more stale bits than live ones: else rebuilt.
    const bool rebuild = old_bits_.size() * 64 < 8 * old_keys || marked > 2 * old_keys + 4096;
    previous_.for_each([&](const Key& k, uint32_t number) {
      *old_.try_emplace(k).first = number;
      if (!rebuild) mark_old(k);
    });
    marked_ = marked;
    if (rebuild) {
      old_bits_.assign(std::max<size_t>(512, std::bit_ceil(8 * old_keys) / 64), 0);
      old_.for_each([&](const Key& k, uint32_t) { mark_old(k); });
      marked_ = old_keys;
    }
    std::swap(previous_, young_);
    young_.clear();
  }

  static constexpr size_t kAlign =
      sizeof(Record) >= 64 ? alignof(Record) : std::max(alignof(Record), std::bit_ceil(sizeof(Record)));
  struct alignas(kAlign) Stored {
    Record record;
  };
  size_t period_;
  size_t inserts_ = 0;  // into the young map since the last generation
  Index young_, previous_, old_;
  std::vector<uint64_t> old_bits_ = std::vector<uint64_t>(512, 0);  // 32 Kibit to start
  size_t marked_ = 0;  // keys marked in old_bits_ since it was built (erased ones stay marked)
  std::vector<Stored> records_;
  std::vector<uint32_t> free_;  // numbers of erased records, reused last first
};

}  // namespace gpumemshim::analyzer

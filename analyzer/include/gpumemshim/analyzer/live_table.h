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


namespace gpumemshim::analyzer {

template <typename Key, typename Record, typename Hash>
class LiveTable {
 public:
  static constexpr size_t kDefaultPeriod = 8192;  // inserts per generation
  explicit LiveTable(size_t period = kDefaultPeriod) : period_(std::max<size_t>(period, 1)) {}

  // The record of k; second: whether k was inserted, and then the record is the caller's to fill
  // (a fresh one is value-initialized, a reused one holds what it last held). Pointers stay valid
  // until the next insert or erase. Inline, as are the lookup and the erase: one call per event.
  [[gnu::always_inline]] std::pair<Record*, bool> try_emplace(const Key& k) {
    const uint64_t h = mix(k);
    if (const size_t older = find_older(k, h); older != kNone) return {&at_slot(older), false};
    auto [number, inserted] = maps_[kYoung].try_emplace(k, h);
    if (!inserted) return {&records_[*number].record, false};
    uint32_t n;
    if (free_.empty()) {
      n = static_cast<uint32_t>(records_.size());
      records_.emplace_back();
    } else {
      n = free_.back();
      free_.pop_back();
    }
    *number = n;
    if (++inserts_ == period_) age();  // moves index entries, not records
    return {&records_[n].record, true};
  }

  static constexpr size_t kNone = SIZE_MAX;
  [[gnu::always_inline]] size_t find_slot(const Key& k) const {
    const uint64_t h = mix(k);
    if (const size_t s = maps_[kYoung].find(k, h); s != kNone) return s;
    return find_older(k, h);
  }
  Record& at_slot(size_t slot) { return records_[maps_[slot >> kMapShift].number(slot & kSlotMask)].record; }
  [[gnu::always_inline]] void erase_slot(size_t slot) {
    Index& m = maps_[slot >> kMapShift];
    free_.push_back(m.number(slot & kSlotMask));
    m.erase(slot & kSlotMask);
  }

  size_t size() const { return maps_[kYoung].size() + maps_[kPrevious].size() + maps_[kOld].size(); }
  template <typename F>
  void for_each(F&& f) const {
    for (const Index& m : maps_)
      m.for_each([&](const Key& k, uint32_t number) { f(k, records_[number].record); });
  }

 private:
  // An index of keys to record numbers: open addressing, linear probing, at most half full,
  // 16-byte slots (for 8-byte keys) that keep their distance from home, so an erase moves the
  // rest of its run back without hashing them again. The caller hashes a key once for all maps.
  class Index {
   public:
    Index() : slots_(16), mask_(15) {}
    size_t find(const Key& k, uint64_t h) const {
      for (size_t i = h & mask();; i = (i + 1) & mask()) {
        const Slot& s = slots_[i];
        if (s.dist == 0) return kNone;
        if (s.key == k) return i;
      }
    }
    std::pair<uint32_t*, bool> try_emplace(const Key& k, uint64_t h) {
      if ((size_ + 1) * 2 > mask_ + 1) grow();
      uint32_t dist = 1;
      for (size_t i = h & mask();; i = (i + 1) & mask(), ++dist) {
        Slot& s = slots_[i];
        if (s.dist == 0) {
          s.key = k;
          s.number = 0;
          s.dist = dist;
          ++size_;
          return {&s.number, true};
        }
        if (s.key == k) return {&s.number, false};
      }
    }
    uint32_t number(size_t i) const { return slots_[i].number; }
    // Backward shift: each later member of the run moves into the hole when its home allows
    // (its distance from home covers the gap).
    void erase(size_t i) {
      for (size_t j = (i + 1) & mask(); slots_[j].dist != 0; j = (j + 1) & mask()) {
        const auto gap = static_cast<uint32_t>((j - i) & mask());
        if (slots_[j].dist > gap) {
          slots_[i] = slots_[j];
          slots_[i].dist -= gap;
          i = j;
        }
      }
      slots_[i].dist = 0;
      --size_;
    }
    // Empties the index, keeping its slots (refilled to about the same size every generation).
    void clear() {
      for (Slot& s : slots_) s.dist = 0;
      size_ = 0;
    }
    size_t size() const { return size_; }
    template <typename F>
    void for_each(F&& f) const {
      for (const Slot& s : slots_)
        if (s.dist != 0) f(s.key, s.number);
    }

   private:
    struct Slot {
      Key key{};
      uint32_t number = 0;
      uint32_t dist = 0;  // 0: empty; else 1 + how far past its home slot it lies
    };
    size_t mask() const { return mask_; }  // kept: the slots' count is a load and a shift away
    void grow() {
      std::vector<Slot> old = std::move(slots_);
      slots_.assign(old.size() * 2, Slot{});
      mask_ = slots_.size() - 1;
      size_ = 0;
      for (const Slot& s : old)
        if (s.dist != 0) *try_emplace(s.key, mix(s.key)).first = s.number;
    }
    std::vector<Slot> slots_;
    size_t mask_;
    size_t size_ = 0;
  };

  // Slot numbers name their map in the top two bits.
  static constexpr int kMapShift = 62;
  static constexpr size_t kSlotMask = (size_t{1} << kMapShift) - 1;
  static constexpr size_t kYoung = 0, kPrevious = 1, kOld = 2;

  // Mixed: keys like 2 MiB-aligned addresses share their low bits.
  static uint64_t mix(const Key& k) {
    uint64_t h = static_cast<uint64_t>(Hash{}(k));
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 29);
  }

  size_t find_older(const Key& k, uint64_t h) const {
    if (const size_t s = maps_[kPrevious].find(k, h); s != kNone) return s | (kPrevious << kMapShift);
    if (maps_[kOld].size() == 0 || !maybe_old(h)) return kNone;
    if (const size_t s = maps_[kOld].find(k, h); s != kNone) return s | (kOld << kMapShift);
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
    previous.for_each([&](const Key& k, uint32_t number) {
      const uint64_t h = mix(k);
      *old.try_emplace(k, h).first = number;
      if (!rebuild) mark_old(h);
    });
    marked_ = marked;
    if (rebuild) {
      old_bits_.assign(std::min<size_t>(size_t{1} << 26, std::max<size_t>(512, std::bit_ceil(8 * old_keys) / 64)), 0);
      old.for_each([&](const Key& k, uint32_t) { mark_old(mix(k)); });
      marked_ = old_keys;
    }
    std::swap(previous, young);
    young.clear();
  }

  static constexpr size_t kAlign =
      sizeof(Record) >= 64 ? alignof(Record) : std::max(alignof(Record), std::bit_ceil(sizeof(Record)));
  struct alignas(kAlign) Stored {
    Record record;
  };
  size_t period_;
  size_t inserts_ = 0;  // into the young map since the last generation
  Index maps_[3];       // young, previous, old
  std::vector<uint64_t> old_bits_ = std::vector<uint64_t>(512, 0);  // 32 Kibit to start
  size_t marked_ = 0;  // keys marked in old_bits_ since it was built (erased ones stay marked)
  std::vector<Stored> records_;
  std::vector<uint32_t> free_;  // numbers of erased records, reused last first
};

}  // namespace gpumemshim::analyzer

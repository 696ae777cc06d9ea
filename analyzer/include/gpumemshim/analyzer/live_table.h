// The replay's live allocations by key, in two parts: an open-addressing index of small slots
// (key -> record number) and the records themselves in a dense array whose freed entries are
// reused last-freed-first. A trace that leaks tens of thousands of allocations then keeps its
// index small enough for the cache (24-byte slots instead of 88) and its busy records together,
// where one table of whole records made every free a cache miss (perf: a third of Replay::free).
// Same interface as FlatMap's for the calls the replay makes. A record of up to 64 bytes is
// aligned to its power-of-two size, so reading one touches a single cache line.
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
 public:
  // The record of k, value-initialized when it was not there; second: whether it was inserted.
  // Pointers stay valid until the next insert or erase.
  std::pair<Record*, bool> try_emplace(const Key& k) {
    auto [number, inserted] = index_.try_emplace(k);
    if (!inserted) return {&records_[*number].record, false};
    if (free_.empty()) {
      *number = static_cast<uint32_t>(records_.size());
      records_.emplace_back();
    } else {
      *number = free_.back();
      free_.pop_back();
      records_[*number].record = Record{};
    }
    return {&records_[*number].record, true};
  }

  static constexpr size_t kNone = FlatMap<Key, uint32_t, Hash>::kNone;
  size_t find_slot(const Key& k) const { return index_.find_slot(k); }
  Record& at_slot(size_t slot) { return records_[index_.at_slot(slot)].record; }
  void erase_slot(size_t slot) {
    free_.push_back(index_.at_slot(slot));
    index_.erase_slot(slot);
  }

  size_t size() const { return index_.size(); }
  template <typename F>
  void for_each(F&& f) const {
    index_.for_each([&](const Key& k, uint32_t number) { f(k, records_[number].record); });
  }

 private:
  static constexpr size_t kAlign =
      sizeof(Record) >= 64 ? alignof(Record) : std::max(alignof(Record), std::bit_ceil(sizeof(Record)));
  struct alignas(kAlign) Stored {
    Record record;
  };
  FlatMap<Key, uint32_t, Hash> index_;
  std::vector<Stored> records_;
  std::vector<uint32_t> free_;  // numbers of erased records, reused last first
};

}  // namespace gpumemshim::analyzer

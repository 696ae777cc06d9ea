// expect_no_leak regions: ranges named "expect_no_leak:<name>", opened and closed by markers. An
// allocation made inside one and alive at the end is a leak of that region (leaks.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gpumemshim/format/records.h"

namespace gpumemshim::analyzer {

struct Region {
  std::string name;  // without the prefix
  uint64_t thread_id = 0;
  uint64_t begin_ns = 0;
  uint64_t end_ns = UINT64_MAX;  // UINT64_MAX: never closed (ends with the trace)
};

class RegionTracker {
 public:
  // No region open; it fits the 24 bits a live record of the replay keeps its region in, so at
  // most kNone regions are opened.
  static constexpr uint32_t kNone = (uint32_t{1} << 24) - 1;

  void push(const format::MarkerRecord& r);  // a range push: opens a region if it names one
  void pop(const format::MarkerRecord& r);   // a range pop: may close one
  // The innermost region open now (kNone: none).
  uint32_t open() const { return open_.empty() ? kNone : open_.back(); }
  // Every region opened, by the index open() gave.
  const std::vector<Region>& all() const { return regions_; }

 private:
  std::vector<Region> regions_;
  std::vector<uint32_t> open_;  // innermost last
};

}  // namespace gpumemshim::analyzer

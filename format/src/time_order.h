// Time order of a trace's events without sorting them. The shim writes per-thread buffers, so the
// file is a shuffle of per-thread runs that are each already in time order (docs/trace-format.md
// "Ordering"). Merging the threads' runs (a heap over threads) gives exactly what a stable sort by
// time gives (ties in file order) at O(n log threads) on 4-byte indexes instead of
// O(n log n) moves of whole records (16 bytes of scratch per event).
#pragma once
#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace gpumemshim::format {

// Calls visit(i) for every i in [0, n) (n < 2^32) ordered by (time_of(i), i). thread_of(i) names the stream
// i belongs to; a stream whose times are not in order (e.g. records without a thread) is sorted on
// its own first, so the result is right for any input.
template <typename TimeOf, typename ThreadOf, typename Visit>
void for_each_in_time_order(size_t n, TimeOf time_of, ThreadOf thread_of, Visit visit) {
  struct Item {
    uint64_t time;  // kept next to the index: the merge reads no record twice
    uint32_t index;
  };
  struct Run {
    std::vector<Item> items;  // in file order
    uint64_t last = 0;
    bool sorted = true;
  };
  std::vector<Run> runs;
  std::unordered_map<uint64_t, uint32_t> run_of;  // thread -> runs index
  uint64_t prev_thread = 0;
  uint32_t prev_run = UINT32_MAX;
  bool all_sorted = true;
  uint64_t last = 0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t t = time_of(i);
    all_sorted &= t >= last;
    last = std::max(last, t);
    uint64_t th = thread_of(i);
    if (prev_run == UINT32_MAX || th != prev_thread) {  // runs of one thread are long: look up once
      auto [it, inserted] = run_of.try_emplace(th, static_cast<uint32_t>(runs.size()));
      if (inserted) runs.emplace_back();
      prev_thread = th;
      prev_run = it->second;
    }
    Run& r = runs[prev_run];
    if (t < r.last) r.sorted = false;
    r.last = std::max(r.last, t);
    r.items.push_back(Item{t, static_cast<uint32_t>(i)});
  }
  if (all_sorted) {
    for (size_t i = 0; i < n; ++i) visit(i);
    return;
  }
  for (Run& r : runs)
    if (!r.sorted)
      std::stable_sort(r.items.begin(), r.items.end(),
                       [](const Item& a, const Item& b) { return a.time < b.time; });
  // A min-heap of the runs' heads by (time, index).
  struct Head {
    uint64_t time;
    uint32_t index;
    uint32_t run;
    size_t pos;
  };
  auto later = [](const Head& a, const Head& b) {
    return a.time != b.time ? a.time > b.time : a.index > b.index;
  };
  std::vector<Head> heap;
  heap.reserve(runs.size());
  for (uint32_t k = 0; k < runs.size(); ++k)
    if (!runs[k].items.empty()) heap.push_back(Head{runs[k].items[0].time, runs[k].items[0].index, k, 0});
  std::make_heap(heap.begin(), heap.end(), later);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Head& h = heap.back();
    visit(h.index);
    const std::vector<Item>& items = runs[h.run].items;
    if (++h.pos < items.size()) {
      h.index = items[h.pos].index;
      h.time = items[h.pos].time;
      std::push_heap(heap.begin(), heap.end(), later);
    } else {
      heap.pop_back();
    }
  }
}

}  // namespace gpumemshim::format

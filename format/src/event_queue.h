// The order of a read that holds every timed event to the end of the file: the fallback of the
// streaming order (stream_order.h) for a file too far out of time order for it. Events are queued
// as pointers to their records, decoded once, when they are delivered.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "time_order.h"

namespace gpumemshim::format {

template <typename Event>
class EventQueue {
 public:
  // `stream`: the event's thread (one stream for events without one).
  void push(uint64_t stream, uint64_t time, const Event& e) {
    if (time < last_) sorted_ = false;
    last_ = std::max(last_, time);
    events_.push_back(Item{time, stream, e});
  }
  size_t size() const { return events_.size(); }

  // Calls visit(const Event&) for every event in (time, file order), then forgets them.
  template <typename Visit>
  void deliver(Visit&& visit) {
    if (sorted_) {
      for (const Item& e : events_) visit(e.event);
    } else {
      for_each_in_time_order(
          events_.size(), [&](size_t i) { return events_[i].time; },
          [&](size_t i) { return events_[i].stream; }, [&](size_t i) { visit(events_[i].event); });
    }
    events_.clear();
  }

 private:
  struct Item {
    uint64_t time;
    uint64_t stream;
    Event event;
  };
  std::vector<Item> events_;
  uint64_t last_ = 0;
  bool sorted_ = true;
};

}  // namespace gpumemshim::format

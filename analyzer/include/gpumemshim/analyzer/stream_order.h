// Time order of a trace's events while reading it, keeping only the events not yet safe to replay.
// The shim writes per-thread buffers and drains every thread's ring at least every 50-100 ms, so
// the file is per-thread runs in time order, shuffled within a flush (docs/trace-format.md
// "Ordering"). Events wait in one queue in file order; an event is emitted once no stream, seen or
// not, can still bring an earlier one. A flush drains everything recorded before it, so the next
// flush's records - of any thread, new threads included - come after the previous flush: a
// stream's bound is the end of its batch before the latest one (one flush back), and a stream
// idle for longer than kIdleWindowNs is assumed to bring nothing older than (newest - window).
// Traces of format 1.1 also mark each flush (Flush records, the flusher's clock before it drained):
// once a mark is read, nothing still to come is older than the mark before it, whatever the
// streams did; from the first mark on the streams are no longer followed. Without marks a
// one-thread trace waits for the idle window: a whole second of events queued.
//
// The emitted order is exactly (time, file order), what a stable sort by time gives, whenever
// push() keeps returning true. push() returns false when an event is older than one already
// emitted (a badly out-of-order file): the caller must then redo the read with full buffering
// (for_each_in_time_order), so a result is never wrong, only slower.
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "gpumemshim/analyzer/flat_map.h"

namespace gpumemshim::analyzer {

template <typename Event>
class StreamingTimeOrder {
 public:
  static constexpr uint64_t kIdleWindowNs = 1'000'000'000;  // 10x the shim's flush interval
  static constexpr size_t kMinRound = 4096;                 // events queued before a round
  static constexpr size_t kTargetBytes = 64;  // pointer events: the bytes the visit reads at most

  // Queues `e` (of `stream`, at `time`); may call visit(const Event&) for events now safe.
  template <typename Visit>
  [[gnu::always_inline]] bool push(uint64_t stream, uint64_t time, const Event& e, Visit&& visit) {
    if (time < emitted_time_) return false;  // an earlier event was replayed already
    // A new batch of this stream begins. Once a flush mark was read the marks bound everything:
    // the streams are no longer followed (the shim's ordered flushes switch threads at nearly
    // every event).
    if (!marked_ && (stream != batch_stream_ || !in_batch_)) {
      Stream& s = stream_of(stream);
      s.settled = s.last;
      batch_stream_ = stream;
      batch_ = &s;
      in_batch_ = true;
    }
    if (!marked_) batch_->last = std::max(batch_->last, time);
    newest_ = std::max(newest_, time);
    if constexpr (kPointerEvents) {
      pointers_in_order_ &= queue_.empty() || e >= queue_.back().event;
    }
    queue_.push_back(Item{time, e});
    if (queue_.size() >= next_round_) round(visit);
    return true;
  }

  // A flush mark (format 1.1) at `time`: later records are at or after the previous mark's time.
  // A round runs at once: the queue then holds about one flush (the one just read), where rounds
  // spaced by the queue's size let it grow to four.
  template <typename Visit>
  void flush_mark(uint64_t time, Visit&& visit) {
    marked_ = true;
    mark_bound_ = std::max(mark_bound_, last_mark_);
    last_mark_ = std::max(last_mark_, time);
    round(visit);
  }

  // End of input: emits everything left.
  template <typename Visit>
  void finish(Visit&& visit) {
    emit(UINT64_MAX, visit);
  }

  // Calls f(const Event&) for every event still queued.
  template <typename F>
  void for_each_queued(F&& f) const {
    for (const Item& i : queue_) f(i.event);
  }

  size_t buffered() const { return queue_.size(); }
  size_t max_buffered() const { return max_buffered_; }

 private:
  struct Item {
    uint64_t time;
    Event event;
  };
  struct Stream {
    uint64_t last = 0;     // the latest time pushed
    uint64_t settled = 0;  // `last` when its latest batch began: later flushes come after it
  };

  // A trace the shim wrote in time order switches threads at nearly every event: one flat probe.
  Stream& stream_of(uint64_t id) {
    auto [index, inserted] = index_.try_emplace(id);
    if (inserted) {
      *index = static_cast<uint32_t>(streams_.size());
      streams_.emplace_back();
      batch_ = nullptr;  // streams_ may have moved
    }
    return streams_[*index];
  }

  // Emits what is safe now. Each round reads the whole queue: rounds spaced by at least what
  // stayed keep that linear.
  template <typename Visit>
  [[gnu::noinline]] void round(Visit& visit) {
    emit(bound(), visit);
    next_round_ = std::max(kMinRound, 2 * queue_.size());
  }

  // Events at or before this time cannot be preceded by one still to come.
  uint64_t bound() const {
    uint64_t idle = newest_ > kIdleWindowNs ? newest_ - kIdleWindowNs : 0;
    if (marked_) return std::max(idle, mark_bound_);  // what the streams give is at least idle
    uint64_t b = UINT64_MAX;
    for (const Stream& s : streams_) b = std::min(b, std::max(s.settled, idle));
    return std::max(b, mark_bound_);
  }

  // The queued events at or before `bound`, in (time, file order): taken out of the queue (the
  // rest keeps file order) and put in that order by a stable LSD radix sort of 8-byte keys, the
  // time above the event's place in the file, unless they came in order (one thread's events).
  // For pointer events (records in a mapped file, queued in file order) the place is the offset
  // from the first one queued, so the sorted keys name the records themselves; for other events it
  // is the place among the ready ones.
  template <typename Visit>
  void emit(uint64_t bound, Visit& visit) {
    max_buffered_ = std::max(max_buffered_, queue_.size());
    if (queue_.empty()) return;
    // Every ready time is in [base, top]: nothing older than the last emitted event is queued.
    const uint64_t base = emitted_time_, top = std::min(bound, newest_);
    int place_bits = 0;
    if constexpr (kPointerEvents) {
      if (!pointers_in_order_) return emit_by_stable_sort(bound, visit);
      place_bits = bit_width(static_cast<uint64_t>(queue_.back().event - queue_.front().event));
    } else {
      place_bits = bit_width(queue_.size() - 1);
    }
    const int time_bits = bit_width(top - base);
    if (time_bits + place_bits > 64 || queue_.size() > UINT32_MAX)
      return emit_by_stable_sort(bound, visit);
    const Layout layout = Layout::of(time_bits, place_bits);
    const Event first = queue_.front().event;
    // Grown, never shrunk: a round's buffers are reused without being cleared.
    if (keys_.size() < queue_.size()) keys_.resize(queue_.size());
    if constexpr (!kPointerEvents) {
      if (ready_events_.size() < queue_.size()) ready_events_.resize(queue_.size());
    }
    count_.assign(layout.buckets, 0);
    size_t kept = 0, n = 0;
    uint64_t last_key = 0;
    bool in_order = true;
    for (size_t i = 0; i < queue_.size(); ++i) {
      const Item& it = queue_[i];
      if (it.time <= bound) {
        uint64_t place;
        if constexpr (kPointerEvents) {
          place = static_cast<uint64_t>(it.event - first);
        } else {
          ready_events_[n] = it.event;
          place = n;
        }
        const uint64_t key = ((it.time - base) << place_bits) | place;
        in_order &= key >= last_key;
        last_key = std::max(last_key, key);
        keys_[n++] = key;
        ++count_[layout.digit(key, 0)];
      } else {
        queue_[kept++] = it;
      }
    }
    queue_.resize(kept);
    if (n == 0) return;
    if (!in_order && !insertion_sort_keys(n)) sort_keys(layout, n);
    const uint64_t place_mask = (uint64_t{1} << place_bits) - 1;
    auto event_of = [&](uint64_t key) -> Event {
      if constexpr (kPointerEvents)
        return first + (key & place_mask);
      else
        return ready_events_[key & place_mask];
    };
    for (size_t i = 0; i < n; ++i) {
      if constexpr (kPointerEvents) {
        // The records are long out of the cache: fetched ahead, both cache lines a record of up
        // to kTargetBytes can span (a 2.x Alloc is 50 bytes, across two lines most of the time).
        constexpr size_t kAhead = 8;
        if (i + kAhead < n) {
          const Event target = event_of(keys_[i + kAhead]);
          __builtin_prefetch(target);
          __builtin_prefetch(target + (kTargetBytes - 1));
        }
      }
      visit(static_cast<const Event&>(event_of(keys_[i])));
    }
    emitted_time_ = base + (last_key >> place_bits);  // the latest emitted
  }

  static int bit_width(uint64_t v) { return static_cast<int>(std::bit_width(v)); }

  // The radix digits of a round's keys: the time bits above the place bits, in digits of at most
  // 13 bits (a 32 KiB count table stays in the L1 cache), as few passes as the time range needs,
  // balanced across them.
  struct Layout {
    int place_bits = 0, passes = 0, digit_bits = 0;
    size_t buckets = 1;
    static Layout of(int time_bits, int place_bits) {
      Layout l;
      l.place_bits = place_bits;
      l.passes = (time_bits + 12) / 13;
      l.digit_bits = l.passes == 0 ? 0 : (time_bits + l.passes - 1) / l.passes;
      l.buckets = size_t{1} << l.digit_bits;
      return l;
    }
    size_t digit(uint64_t key, int pass) const {
      return static_cast<size_t>((key >> (place_bits + pass * digit_bits)) & (buckets - 1));
    }
  };

  // A round of a trace the shim wrote in time order (each flush merged by time) holds a few
  // stragglers, each a short way behind its place: insertion puts them there for less than one
  // radix pass. Gives up (keys_ still a permutation, count_ still right) past ~n/32 moves.
  bool insertion_sort_keys(size_t n) {
    size_t budget = n / 32 + 64;
    for (size_t i = 1; i < n; ++i) {
      const uint64_t key = keys_[i];
      if (key >= keys_[i - 1]) continue;
      size_t j = i;
      do {
        keys_[j] = keys_[j - 1];
        --j;
        if (--budget == 0) {
          keys_[j] = key;
          return false;
        }
      } while (j > 0 && keys_[j - 1] > key);
      keys_[j] = key;
    }
    return true;
  }

  // The first n keys_ (with count_ holding the first pass's counts) in order. Each pass's counts
  // are taken while the previous pass moves the keys.
  void sort_keys(const Layout& l, size_t n) {
    if (scratch_.size() < n) scratch_.resize(n);
    for (int p = 0; p < l.passes; ++p) {
      uint32_t sum = 0;  // counts to starting places
      for (uint32_t& c : count_) {
        const uint32_t k = c;
        c = sum;
        sum += k;
      }
      const bool more = p + 1 < l.passes;
      next_count_.assign(more ? l.buckets : 0, 0);
      for (size_t i = 0; i < n; ++i) {
        const uint64_t key = keys_[i];
        scratch_[count_[l.digit(key, p)]++] = key;
        if (more) ++next_count_[l.digit(key, p + 1)];
      }
      keys_.swap(scratch_);
      count_.swap(next_count_);
    }
  }

  // A round whose keys would not fit 64 bits (a round spanning days), or pointer events that were
  // not pushed in increasing order: the ready events by a plain stable sort on their time.
  template <typename Visit>
  void emit_by_stable_sort(uint64_t bound, Visit& visit) {
    std::vector<Item> ready;
    size_t kept = 0;
    for (const Item& it : queue_) {
      if (it.time <= bound)
        ready.push_back(it);
      else
        queue_[kept++] = it;
    }
    queue_.resize(kept);
    std::stable_sort(ready.begin(), ready.end(),
                     [](const Item& a, const Item& b) { return a.time < b.time; });
    for (const Item& it : ready) {
      emitted_time_ = it.time;
      visit(static_cast<const Event&>(it.event));
    }
  }

  std::vector<Item> queue_;  // in file order
  static constexpr bool kPointerEvents = std::is_pointer_v<Event>;
  bool pointers_in_order_ = true;    // pointer events: every one pushed after the one before it
  std::vector<Event> ready_events_;  // not pointers: a round's ready events, in file order
  std::vector<uint64_t> keys_, scratch_;      // a round's ready events (emit)
  std::vector<uint32_t> count_, next_count_;  // a round holds fewer than 2^32 events
  std::vector<Stream> streams_;
  struct IdHash {  // FlatMap mixes the bits itself
    size_t operator()(uint64_t id) const noexcept { return static_cast<size_t>(id); }
  };
  FlatMap<uint64_t, uint32_t, IdHash> index_;  // stream id -> streams_ index
  uint64_t batch_stream_ = 0;                  // the stream of the batch being read
  Stream* batch_ = nullptr;
  bool in_batch_ = false;
  uint64_t newest_ = 0;
  bool marked_ = false;      // a flush mark was read: the marks bound the order, not the streams
  uint64_t last_mark_ = 0;   // the latest flush mark's time
  uint64_t mark_bound_ = 0;  // the one before it: nothing still to come is older
  uint64_t emitted_time_ = 0;
  size_t next_round_ = kMinRound;
  size_t max_buffered_ = 0;
};

}  // namespace gpumemshim::analyzer

// Time order of a trace's events while reading it, keeping only the events not yet safe to deliver.
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
// Writers of 3.2 on make the marks exact (every record after a mark was made at or after it, but
// for a thread that spent longer than a few flushes making its record): with exact_marks(), a mark
// lets everything up to its own time out, which halves the window.
//
// The emitted order is exactly (time, file order), what a stable sort by time gives, but for
// stragglers: events older than one already emitted. Before the first mark push() refuses one
// (returns false: a badly out-of-order file without marks; the caller must then redo the read
// with full buffering, for_each_in_time_order, so a result is never wrong, only slower). Once
// marks were read, a straggler is a record its thread took longer than the marks allow to make
// (preempted for long on a loaded machine): it is visited at once, late, and counted, where a
// whole-trace fallback would cost memory in proportion to the trace. visit.late(event, time),
// when the visitor has it, gets the time of the last event emitted, where the straggler now is.
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace gpumemshim::format {

template <typename Event>
class StreamingTimeOrder {
 public:
  static constexpr uint64_t kIdleWindowNs = 1'000'000'000;  // 10x the shim's flush interval
  static constexpr size_t kMinRound = 4096;                 // events queued before a round
  static constexpr size_t kTargetBytes = 64;  // pointer events: the bytes the visit reads at most

  // Queues `e` (of `stream`, at `time`); may call visit(const Event&) for events now safe.
  // Marks of a 3.2 writer on: exact (see above).
  void exact_marks() { exact_marks_ = true; }

  template <typename Visit>
  [[gnu::always_inline]] bool push(uint64_t stream, uint64_t time, const Event& e, Visit&& visit) {
    if (time < emitted_time_) [[unlikely]]  // an earlier event was delivered already
      return straggler(time, e, visit);
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
    if (queue_.size() > head_ && time < queue_.back().time) breaks_.push_back(queue_.size());
    queue_.push_back(Item{time, e});
    if (queue_.size() - head_ >= next_round_) round(visit);
    return true;
  }

  // A flush mark (format 1.1) at `time`: later records are at or after the previous mark's time.
  // A round runs at once: the queue then holds about one flush (the one just read), where rounds
  // spaced by the queue's size let it grow to four.
  template <typename Visit>
  void flush_mark(uint64_t time, Visit&& visit) {
    marked_ = true;
    mark_bound_ = std::max(mark_bound_, exact_marks_ ? time : last_mark_);
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
    for (size_t i = head_; i < queue_.size(); ++i) f(queue_[i].event);
  }

  size_t buffered() const { return queue_.size() - head_; }
  size_t max_buffered() const { return max_buffered_; }
  // Stragglers visited late, and by how much at most (their time to the emitted one's).
  uint64_t late_events() const { return late_events_; }
  uint64_t max_lateness() const { return max_lateness_; }

 private:
  template <typename Visit>
  [[gnu::noinline]] bool straggler(uint64_t time, const Event& e, Visit& visit) {
    if (!marked_) return false;
    ++late_events_;
    max_lateness_ = std::max(max_lateness_, emitted_time_ - time);
    if constexpr (requires { visit.late(e, emitted_time_); })
      visit.late(e, emitted_time_);
    else
      visit(static_cast<const Event&>(e));
    return true;
  }

  struct Item {
    uint64_t time;
    Event event;
  };
  struct Stream {
    uint64_t last = 0;     // the latest time pushed
    uint64_t settled = 0;  // `last` when its latest batch began: later flushes come after it
  };

  // Looked up when a batch of another stream begins, and only until the first flush mark.
  Stream& stream_of(uint64_t id) {
    auto [it, inserted] = index_.try_emplace(id, static_cast<uint32_t>(streams_.size()));
    if (inserted) {
      streams_.emplace_back();
      batch_ = nullptr;  // streams_ may have moved
    }
    return streams_[it->second];
  }

  // Emits what is safe now. Each round reads the whole queue: rounds spaced by at least what
  // stayed keep that linear. A round whose bound did not move since the last one is skipped:
  // what it would emit (events pushed since, older than a bound already passed: none in a shim's
  // trace) is emitted by a later one just as well.
  template <typename Visit>
  [[gnu::noinline]] void round(Visit& visit) {
    const uint64_t b = bound();
    if (b != last_bound_ || !rounds_) emit(b, visit);
    last_bound_ = b;
    rounds_ = true;
    next_round_ = std::max(kMinRound, 2 * buffered());
  }

  // Events at or before this time cannot be preceded by one still to come.
  uint64_t bound() const {
    uint64_t idle = newest_ > kIdleWindowNs ? newest_ - kIdleWindowNs : 0;
    if (marked_) return std::max(idle, mark_bound_);  // what the streams give is at least idle
    uint64_t b = UINT64_MAX;
    for (const Stream& s : streams_) b = std::min(b, std::max(s.settled, idle));
    return std::max(b, mark_bound_);
  }

  // The queued events at or before `bound`, in (time, file order), taken out of the queue (the
  // rest keeps file order). In a file whose flushes are in time order (the shim merges each one)
  // they are the queue's start, in order but for a few stragglers a short way behind their place:
  // they are visited where they are, after insertion moved the stragglers. Anything else is put in
  // order by a stable LSD radix sort of 8-byte keys, the time above the event's place.
  template <typename Visit>
  void emit(uint64_t bound, Visit& visit) {
    max_buffered_ = std::max(max_buffered_, buffered());
    // The queue is queue_[head_, size): q[0, size).
    Item* const q = queue_.data() + head_;
    const size_t size = buffered();
    auto later = [](uint64_t t, const Item& item) { return t < item.time; };
    // The tail of events not ready stays where it is; before it, the ready ones go to the front
    // and the others aside, both in file order. The common case moves nothing. The queue's last
    // run in time order (from its last break on) is searched, not read through: in a shim's file
    // it is the whole flush read since the last round.
    const size_t last_run = breaks_.empty() ? 0 : breaks_.back() - head_;
    size_t end = static_cast<size_t>(std::upper_bound(q + last_run, q + size, bound, later) - q);
    if (end == last_run)
      while (end > 0 && q[end - 1].time > bound) --end;
    // The ready start, and where its time order first breaks (SIZE_MAX: nowhere): the first run
    // is searched too, then read on past its end while events are ready.
    const size_t first_run = std::min(breaks_.empty() ? size : breaks_.front() - head_, end);
    size_t n = static_cast<size_t>(std::upper_bound(q, q + first_run, bound, later) - q),
           unsorted = SIZE_MAX;
    if (n == first_run)
      for (uint64_t last = n > 0 ? q[n - 1].time : 0; n < end && q[n].time <= bound; ++n) {
        if (q[n].time < last && unsorted == SIZE_MAX) unsorted = n;
        last = q[n].time;
      }
    held_.clear();
    for (size_t i = n; i < end; ++i) {
      if (q[i].time <= bound) {
        q[n++] = q[i];
        unsorted = std::min(unsorted, n - 1);  // not checked
      } else {
        held_.push_back(q[i]);
      }
    }
    if (n > 0) {
      if (unsorted < n && !insertion_sort(q, unsorted, n)) sort_by_keys(q, n);
      for (size_t i = 0; i < n; ++i) {
        if constexpr (kPointerEvents) {
          // The records are long out of the cache: fetched ahead, both cache lines a record of up
          // to kTargetBytes can span (a 2.x Alloc is 50 bytes, across two lines most of the time).
          constexpr size_t kAhead = 8;
          if (i + kAhead < n) {
            const Event target = q[i + kAhead].event;
            __builtin_prefetch(target);
            __builtin_prefetch(target + (kTargetBytes - 1));
          }
        }
        visit(static_cast<const Event&>(q[i].event));
      }
      emitted_time_ = q[n - 1].time;  // the latest emitted
    }
    // What stays, the held events and then the tail, ends where it was: the queue's head moves
    // past what was emitted. The emitted space is given back (by moving what stays to the
    // vector's start) only once it is three times what stays: each event moved a third of a time.
    std::copy(held_.begin(), held_.end(), q + (end - held_.size()));
    const size_t tail = head_ + end;  // where the tail begins, in queue_
    head_ = tail - held_.size();
    // The breaks in time order from the new head on: in and right after the held events (read
    // again), then the tail's, which did not move.
    size_t kept = 0;
    while (kept < breaks_.size() && breaks_[kept] <= tail) ++kept;
    new_breaks_.clear();
    for (size_t i = head_ + 1; i <= tail && i < queue_.size(); ++i)
      if (queue_[i].time < queue_[i - 1].time) new_breaks_.push_back(i);
    new_breaks_.insert(new_breaks_.end(), breaks_.begin() + static_cast<std::ptrdiff_t>(kept),
                       breaks_.end());
    breaks_.swap(new_breaks_);
    if (head_ >= 3 * buffered() && head_ >= kMinRound) {
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(head_));
      for (size_t& b : breaks_) b -= head_;
      head_ = 0;
    }
  }

  static int bit_width(uint64_t v) { return static_cast<int>(std::bit_width(v)); }

  // The ready events (the queue's first n) in time order, stably, by insertion: a round of a trace
  // the shim wrote in time order holds a few stragglers, each a short way behind its place. Gives
  // up past ~n/32 moves, with the events still in file order among equal times. The events before
  // `from` are in order already.
  static bool insertion_sort(Item* q, size_t from, size_t n) {
    size_t budget = n / 32 + 64;
    for (size_t i = std::max<size_t>(from, 1); i < n; ++i) {
      if (q[i].time >= q[i - 1].time) continue;
      const Item item = q[i];
      size_t j = i;
      do {
        q[j] = q[j - 1];
        --j;
        if (--budget == 0) {
          q[j] = item;
          return false;
        }
      } while (j > 0 && q[j - 1].time > item.time);
      q[j] = item;
    }
    return true;
  }

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

  // The ready events (the queue's first n, in file order among equal times) in time order, stably:
  // a radix sort of keys (time - oldest, place), or, when those would not fit 64 bits (a round
  // spanning days), a plain stable sort.
  void sort_by_keys(Item* q, size_t n) {
    Item* const first = q;
    Item* const last = q + n;
    uint64_t base = UINT64_MAX, top = 0;
    for (const Item* it = first; it != last; ++it) {
      base = std::min(base, it->time);
      top = std::max(top, it->time);
    }
    const int time_bits = bit_width(top - base), place_bits = bit_width(n - 1);
    if (time_bits + place_bits > 64 || n > UINT32_MAX) {
      std::stable_sort(first, last, [](const Item& a, const Item& b) { return a.time < b.time; });
      return;
    }
    if (keys_.size() < n) keys_.resize(n);
    for (size_t i = 0; i < n; ++i) keys_[i] = ((q[i].time - base) << place_bits) | i;
    sort_keys(Layout::of(time_bits, place_bits), n);
    const uint64_t place_mask = (uint64_t{1} << place_bits) - 1;
    sorted_.resize(n);
    for (size_t i = 0; i < n; ++i) sorted_[i] = q[keys_[i] & place_mask];
    std::copy(sorted_.begin(), sorted_.end(), first);
  }

  // The first n keys_ in order. Each pass's counts are taken while the previous pass moves them.
  void sort_keys(const Layout& l, size_t n) {
    if (scratch_.size() < n) scratch_.resize(n);
    count_.assign(l.buckets, 0);
    for (size_t i = 0; i < n; ++i) ++count_[l.digit(keys_[i], 0)];
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

  std::vector<Item> queue_;  // from head_ on, in file order (before it: emitted, space to reuse)
  size_t head_ = 0;
  // Every place i in queue_ past head_ whose event is older than the one before it (where a run in
  // time order ends), increasing; perhaps a few more.
  std::vector<size_t> breaks_, new_breaks_;
  static constexpr bool kPointerEvents = std::is_pointer_v<Event>;
  std::vector<Item> held_, sorted_;       // a round's: events not ready before the tail, sort_by_keys'
  std::vector<uint64_t> keys_, scratch_;  // sort_by_keys'
  std::vector<uint32_t> count_, next_count_;  // a round holds fewer than 2^32 events
  std::vector<Stream> streams_;
  std::unordered_map<uint64_t, uint32_t> index_;  // stream id -> streams_ index
  uint64_t batch_stream_ = 0;                  // the stream of the batch being read
  Stream* batch_ = nullptr;
  bool in_batch_ = false;
  uint64_t newest_ = 0;
  bool marked_ = false;      // a flush mark was read: the marks bound the order, not the streams
  bool exact_marks_ = false;
  uint64_t late_events_ = 0, max_lateness_ = 0;
  uint64_t last_mark_ = 0;   // the latest flush mark's time
  uint64_t mark_bound_ = 0;  // the one before it: nothing still to come is older
  uint64_t emitted_time_ = 0;
  size_t next_round_ = kMinRound;
  uint64_t last_bound_ = 0;  // the last round's
  bool rounds_ = false;      // a round ran
  size_t max_buffered_ = 0;
};

}  // namespace gpumemshim::format

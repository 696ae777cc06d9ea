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
// streams did. Without marks a one-thread trace waits for the idle window: a whole second of
// events queued.
//
// The emitted order is exactly (time, file order), what a stable sort by time gives, whenever
// push() keeps returning true. push() returns false when an event is older than one already
// emitted (a badly out-of-order file): the caller must then redo the read with full buffering
// (for_each_in_time_order), so a result is never wrong, only slower.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace gpumemshim::analyzer {

template <typename Event>
class StreamingTimeOrder {
 public:
  static constexpr uint64_t kIdleWindowNs = 1'000'000'000;  // 10x the shim's flush interval
  static constexpr size_t kMinRound = 4096;                  // events queued before a round
  static constexpr size_t kTargetBytes = 64;  // pointer events: the bytes the visit reads at most

  // Queues `e` (of `stream`, at `time`); may call visit(const Event&) for events now safe.
  template <typename Visit>
  bool push(uint64_t stream, uint64_t time, const Event& e, Visit&& visit) {
    if (time < emitted_time_) return false;  // an earlier event was replayed already
    if (stream != batch_stream_ || !in_batch_) {  // a new batch of this stream begins
      Stream& s = stream_of(stream);
      s.settled = s.last;
      batch_stream_ = stream;
      batch_ = &s;
      in_batch_ = true;
    }
    batch_->last = std::max(batch_->last, time);
    newest_ = std::max(newest_, time);
    queue_.push_back(Item{time, e});
    if (queue_.size() >= next_round_) round(visit);
    return true;
  }

  // A flush mark (format 1.1) at `time`: later records are at or after the previous mark's time.
  // A round runs at once: the queue then holds about one flush (the one just read), where rounds
  // spaced by the queue's size let it grow to four.
  template <typename Visit>
  void flush_mark(uint64_t time, Visit&& visit) {
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

  Stream& stream_of(uint64_t id) {
    auto [it, inserted] = index_.try_emplace(id, static_cast<uint32_t>(streams_.size()));
    if (inserted) {
      streams_.emplace_back();
      batch_ = nullptr;  // streams_ may have moved
    }
    return streams_[it->second];
  }

  // Emits what is safe now. Each round reads the whole queue: rounds spaced by at least what
  // stayed keep that linear.
  template <typename Visit>
  void round(Visit& visit) {
    emit(bound(), visit);
    next_round_ = std::max(kMinRound, 2 * queue_.size());
  }

  // Events at or before this time cannot be preceded by one still to come.
  uint64_t bound() const {
    uint64_t idle = newest_ > kIdleWindowNs ? newest_ - kIdleWindowNs : 0;
    uint64_t b = UINT64_MAX;
    for (const Stream& s : streams_) b = std::min(b, std::max(s.settled, idle));
    return std::max(b, mark_bound_);
  }

  // The queued events at or before `bound`, in (time, file order): taken out of the queue (the
  // rest keeps file order) and put in order by a stable LSD radix sort on their time, unless they
  // came in order (one thread's events).
  template <typename Visit>
  void emit(uint64_t bound, Visit& visit) {
    max_buffered_ = std::max(max_buffered_, queue_.size());
    ready_.clear();
    size_t kept = 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    bool in_order = true;
    for (size_t i = 0; i < queue_.size(); ++i) {
      const Item& it = queue_[i];
      if (it.time <= bound) {
        in_order &= it.time >= hi;  // hi: the latest so far
        ready_.push_back(it);
        lo = std::min(lo, it.time);
        hi = std::max(hi, it.time);
      } else {
        queue_[kept++] = it;
      }
    }
    queue_.resize(kept);
    if (ready_.empty()) return;
    if (!in_order) sort_by_time(lo, hi);
    // The events' targets are long out of the cache: fetched ahead, both cache lines a record of
    // up to kTargetBytes can span (a 2.x Alloc is 50 bytes, across two lines most of the time).
    constexpr size_t kAhead = 8;
    for (size_t i = 0; i < ready_.size(); ++i) {
      if constexpr (std::is_pointer_v<Event>) {
        if (i + kAhead < ready_.size()) {
          __builtin_prefetch(ready_[i + kAhead].event);
          __builtin_prefetch(ready_[i + kAhead].event + (kTargetBytes - 1));
        }
      }
      emitted_time_ = ready_[i].time;
      visit(static_cast<const Event&>(ready_[i].event));
    }
  }

  // As few passes as the round's time range needs, digits of at most 13 bits (a 32 KiB count
  // table stays in the L1 cache), balanced across the passes.
  void sort_by_time(uint64_t lo, uint64_t hi) {
    const uint64_t range = hi - lo;
    if (range == 0) return;
    if (ready_.size() > UINT32_MAX) {  // beyond the 32-bit counts: a plain stable sort
      std::stable_sort(ready_.begin(), ready_.end(), [](const Item& a, const Item& b) { return a.time < b.time; });
      return;
    }
    const int bits = 64 - __builtin_clzll(range);
    const int passes = (bits + 12) / 13;
    const int digit = (bits + passes - 1) / passes;
    const size_t buckets = size_t{1} << digit;
    scratch_.resize(ready_.size());
    for (int shift = 0; shift < bits; shift += digit) {
      count_.assign(buckets + 1, 0);
      for (const Item& it : ready_) ++count_[(((it.time - lo) >> shift) & (buckets - 1)) + 1];
      for (size_t b = 1; b <= buckets; ++b) count_[b] += count_[b - 1];
      for (const Item& it : ready_) scratch_[count_[((it.time - lo) >> shift) & (buckets - 1)]++] = it;
      ready_.swap(scratch_);
    }
  }

  std::vector<Item> queue_;    // in file order
  std::vector<Item> ready_, scratch_;
  std::vector<uint32_t> count_;  // a round holds fewer than 2^32 events
  std::vector<Stream> streams_;
  std::unordered_map<uint64_t, uint32_t> index_;  // stream id -> streams_ index
  uint64_t batch_stream_ = 0;  // the stream of the batch being read
  Stream* batch_ = nullptr;
  bool in_batch_ = false;
  uint64_t newest_ = 0;
  uint64_t last_mark_ = 0;   // the latest flush mark's time
  uint64_t mark_bound_ = 0;  // the one before it: nothing still to come is older
  uint64_t emitted_time_ = 0;
  size_t next_round_ = kMinRound;
  size_t max_buffered_ = 0;
};

}  // namespace gpumemshim::analyzer

// Time order of a trace's events while reading it, keeping only the events not yet safe to replay.
// The shim writes per-thread buffers and drains every thread's ring at least every 50-100 ms, so
// the file is per-thread runs in time order, shuffled within a flush (docs/trace-format.md
// "Ordering"). Each stream (thread) gets a FIFO; an event is emitted once no stream, seen or not,
// can still bring an earlier one. A flush drains everything recorded before it, so the next
// flush's records - of any thread, new threads included - come after the previous flush: a
// stream's bound is the end of its batch before the latest one (one flush back), and a stream
// idle for longer than kIdleWindowNs is assumed to bring nothing older than (newest - window).
//
// The emitted order is exactly (time, file order), what a stable sort by time gives, whenever
// push() keeps returning true. push() returns false when an event is older than one already
// emitted (a badly out-of-order file): the caller must then redo the read with full buffering
// (for_each_in_time_order), so a result is never wrong, only slower.
#pragma once
#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace gpumemshim::analyzer {

template <typename Event>
class StreamingTimeOrder {
 public:
  static constexpr uint64_t kIdleWindowNs = 1'000'000'000;  // 10x the shim's flush interval
  static constexpr uint32_t kEmitEvery = 4096;              // pushes between emission rounds

  // Queues `e` (of `stream`, at `time`); may call visit(const Event&) for events now safe.
  template <typename Visit>
  bool push(uint64_t stream, uint64_t time, const Event& e, Visit&& visit) {
    if (time < emitted_time_) return false;  // an earlier event was replayed already
    Stream& s = stream_of(stream);
    if (stream != batch_stream_ || !in_batch_) {  // a new batch of this stream begins
      s.settled = s.last;
      batch_stream_ = stream;
      in_batch_ = true;
    }
    Item item{time, seq_++, e};
    if (time >= s.last || s.items.size() == s.head) {
      s.items.push_back(item);
    } else {  // out of order inside its stream: insert after the queued events at or before it
      auto pos = std::upper_bound(s.items.begin() + static_cast<std::ptrdiff_t>(s.head), s.items.end(),
                                  time, [](uint64_t t, const Item& x) { return t < x.time; });
      s.items.insert(pos, item);
    }
    s.last = std::max(s.last, time);
    newest_ = std::max(newest_, time);
    ++buffered_;
    if (++since_emit_ >= kEmitEvery) {
      since_emit_ = 0;
      emit(bound(), visit);
    }
    return true;
  }

  // End of input: emits everything left.
  template <typename Visit>
  void finish(Visit&& visit) {
    emit(UINT64_MAX, visit);
  }

  // Calls f(const Event&) for every event still queued.
  template <typename F>
  void for_each_queued(F&& f) const {
    for (const Stream& s : streams_)
      for (size_t i = s.head; i < s.items.size(); ++i) f(static_cast<const Event&>(s.items[i].event));
  }

  size_t buffered() const { return buffered_; }
  size_t max_buffered() const { return max_buffered_; }

 private:
  struct Item {
    uint64_t time;
    uint64_t seq;  // file order among timed events: ties by time replay in file order
    Event event;
  };
  struct Head {
    uint64_t time;
    uint64_t seq;
    uint32_t stream;
  };
  struct Stream {
    std::vector<Item> items;  // items[head..] are queued, in (time, seq) order
    size_t head = 0;
    uint64_t last = 0;     // the latest time pushed
    uint64_t settled = 0;  // `last` when its latest batch began: later flushes come after it
  };

  Stream& stream_of(uint64_t id) {
    if (last_stream_ != UINT32_MAX && id == last_id_) return streams_[last_stream_];
    auto [it, inserted] = index_.try_emplace(id, static_cast<uint32_t>(streams_.size()));
    if (inserted) streams_.emplace_back();
    last_id_ = id;
    last_stream_ = it->second;
    return streams_[last_stream_];
  }

  // Events at or before this time cannot be preceded by one still to come.
  uint64_t bound() const {
    uint64_t idle = newest_ > kIdleWindowNs ? newest_ - kIdleWindowNs : 0;
    uint64_t b = UINT64_MAX;
    for (const Stream& s : streams_) b = std::min(b, std::max(s.settled, idle));
    return b;
  }

  template <typename Visit>
  void emit(uint64_t bound, Visit& visit) {
    max_buffered_ = std::max(max_buffered_, buffered_);
    auto later = [](const Head& a, const Head& b) { return a.time != b.time ? a.time > b.time : a.seq > b.seq; };
    heap_.clear();
    for (uint32_t k = 0; k < streams_.size(); ++k) {
      const Stream& s = streams_[k];
      if (s.head < s.items.size() && s.items[s.head].time <= bound)
        heap_.push_back(Head{s.items[s.head].time, s.items[s.head].seq, k});
    }
    std::make_heap(heap_.begin(), heap_.end(), later);
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), later);
      Head& h = heap_.back();
      Stream& s = streams_[h.stream];
      emitted_time_ = h.time;
      visit(static_cast<const Event&>(s.items[s.head].event));
      --buffered_;
      if (++s.head < s.items.size() && s.items[s.head].time <= bound) {
        h.time = s.items[s.head].time;
        h.seq = s.items[s.head].seq;
        std::push_heap(heap_.begin(), heap_.end(), later);
      } else {
        heap_.pop_back();
      }
    }
    for (Stream& s : streams_) {  // drop what was emitted; the storage is reused
      if (s.head == s.items.size()) {
        s.items.clear();
        s.head = 0;
      } else if (s.head > 1024 && s.head * 2 > s.items.size()) {
        s.items.erase(s.items.begin(), s.items.begin() + static_cast<std::ptrdiff_t>(s.head));
        s.head = 0;
      }
    }
  }

  std::vector<Stream> streams_;
  std::unordered_map<uint64_t, uint32_t> index_;  // stream id -> streams_ index
  uint64_t last_id_ = 0;
  uint32_t last_stream_ = UINT32_MAX;
  uint64_t batch_stream_ = 0;  // the stream of the batch being read
  bool in_batch_ = false;
  uint64_t seq_ = 0;
  uint64_t newest_ = 0;
  uint64_t emitted_time_ = 0;
  uint32_t since_emit_ = 0;
  size_t buffered_ = 0, max_buffered_ = 0;
  std::vector<Head> heap_;  // emit()'s merge of the streams' heads, kept for its storage
};

}  // namespace gpumemshim::analyzer

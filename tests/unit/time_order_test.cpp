// for_each_in_time_order must visit events exactly as a stable sort by time orders them.
#include "time_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <random>
#include <type_traits>
#include <vector>

#include "stream_order.h"

namespace ga = gpumemshim::format;

namespace {

struct Ev {
  uint64_t time;
  uint64_t thread;
};

std::vector<size_t> merged(const std::vector<Ev>& ev) {
  std::vector<size_t> out;
  ga::for_each_in_time_order(
      ev.size(), [&](size_t i) { return ev[i].time; }, [&](size_t i) { return ev[i].thread; },
      [&](size_t i) { out.push_back(i); });
  return out;
}

std::vector<size_t> stable_sorted(const std::vector<Ev>& ev) {
  std::vector<size_t> idx(ev.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](size_t a, size_t b) { return ev[a].time < ev[b].time; });
  return idx;
}

// Like the shim's file: each thread's events in time order, written in per-thread batches.
std::vector<Ev> shim_like(std::mt19937_64& rng, size_t threads, size_t n, bool ties) {
  std::vector<std::vector<Ev>> pending(threads);
  std::vector<Ev> file;
  uint64_t time = 0;
  for (size_t i = 0; i < n; ++i) {
    time += ties ? rng() % 2 : 1 + rng() % 100;
    size_t t = rng() % threads;
    pending[t].push_back(Ev{time, t});
    if (rng() % 500 == 0 || i + 1 == n) {
      for (size_t k = 0; k < threads; ++k) {
        size_t w = (k + rng()) % threads;  // the drain order changes every flush
        file.insert(file.end(), pending[w].begin(), pending[w].end());
        pending[w].clear();
      }
    }
  }
  return file;
}

}  // namespace

TEST(TimeOrder, EqualsStableSortOnShimLikeFiles) {
  std::mt19937_64 rng(7);
  for (bool ties : {false, true})
    for (size_t threads : {1, 2, 16, 100}) {
      std::vector<Ev> ev = shim_like(rng, threads, 20000, ties);
      EXPECT_EQ(merged(ev), stable_sorted(ev)) << threads << " threads, ties " << ties;
    }
}

TEST(TimeOrder, ThreadsOutOfOrderOnTheirOwnAreStillSorted) {
  std::mt19937_64 rng(11);
  std::vector<Ev> ev;
  for (size_t i = 0; i < 5000; ++i) ev.push_back(Ev{rng() % 1000, rng() % 3});  // no order at all
  EXPECT_EQ(merged(ev), stable_sorted(ev));
}

TEST(TimeOrder, SortedInputKeepsFileOrder) {
  std::vector<Ev> ev = {{1, 5}, {1, 4}, {2, 5}, {2, 4}, {3, 9}};
  EXPECT_EQ(merged(ev), (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(merged({}).empty());
}

// The streaming merge (stream_order.h) must give the same order while it accepts the input, and
// must refuse (push returns false) rather than give a different one.
namespace {

// Events with flush marks (format 1.1) at the given positions, applied before the event there.
struct Marked {
  std::vector<Ev> events;
  std::vector<std::pair<size_t, uint64_t>> marks;  // (before event index, time)
};

// One thread with a flush mark every `every` events (the flusher's clock, after every event it
// drained).
Marked one_thread_with_marks(size_t n, size_t every) {
  Marked m;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && i % every == 0) m.marks.emplace_back(i, m.events.back().time);
    m.events.push_back(Ev{1000 + i * 25'000, 1});  // 40 000 events per second
  }
  return m;
}

// The streamed order and the most events held at once, or nothing when refused. The events are
// indexes, or (as the loader queues records of the mapped file) pointers to the events in order.
template <typename Event = size_t>
std::optional<std::pair<std::vector<size_t>, size_t>> streamed_with_marks(const Marked& m) {
  ga::StreamingTimeOrder<Event> order;
  std::vector<size_t> out;
  auto visit = [&](Event e) {
    if constexpr (std::is_pointer_v<Event>)
      out.push_back(static_cast<size_t>(e - m.events.data()));
    else
      out.push_back(e);
  };
  size_t next_mark = 0;
  for (size_t i = 0; i < m.events.size(); ++i) {
    for (; next_mark < m.marks.size() && m.marks[next_mark].first == i; ++next_mark)
      order.flush_mark(m.marks[next_mark].second, visit);
    Event e;
    if constexpr (std::is_pointer_v<Event>)
      e = m.events.data() + i;
    else
      e = i;
    if (!order.push(m.events[i].thread, m.events[i].time, e, visit)) return std::nullopt;
  }
  order.finish(visit);
  return std::make_pair(out, order.max_buffered());
}

// The streamed order, or nothing when the merge refused the input part-way; the same with pointer
// events and index events (checked here).
std::optional<std::vector<size_t>> streamed(const std::vector<Ev>& ev) {
  Marked m{ev, {}};
  auto got = streamed_with_marks(m);
  auto by_pointer = streamed_with_marks<const Ev*>(m);
  EXPECT_EQ(got.has_value(), by_pointer.has_value());
  if (!got || !by_pointer) return std::nullopt;
  EXPECT_EQ(got->first, by_pointer->first);
  return got->first;
}

}  // namespace

TEST(StreamOrder, EqualsStableSortOnShimLikeFilesWithABoundedBuffer) {
  std::mt19937_64 rng(7);
  for (bool ties : {false, true})
    for (size_t threads : {1, 2, 16, 100}) {
      std::vector<Ev> ev = shim_like(rng, threads, 50000, ties);
      std::optional<std::vector<size_t>> got = streamed(ev);
      ASSERT_TRUE(got.has_value()) << threads << " threads, ties " << ties;
      EXPECT_EQ(*got, stable_sorted(ev)) << threads << " threads, ties " << ties;
    }
}

TEST(StreamOrder, KeepsOnlyAWindowOfEvents) {
  std::mt19937_64 rng(3);
  std::vector<Ev> ev = shim_like(rng, 16, 200000, false);
  ga::StreamingTimeOrder<size_t> order;
  size_t visited = 0;
  auto visit = [&](size_t) { ++visited; };
  for (size_t i = 0; i < ev.size(); ++i)
    ASSERT_TRUE(order.push(ev[i].thread, ev[i].time, i, visit));
  EXPECT_LT(order.max_buffered(), ev.size() / 10);  // a few flushes' worth, not the file
  order.finish(visit);
  EXPECT_EQ(visited, ev.size());
  EXPECT_EQ(order.buffered(), 0u);
}

TEST(StreamOrder, FlushMarksBoundAOneThreadWindow) {
  // 400 000 events over 10 s: without marks the idle window (1 s) holds 40 000 of them.
  Marked m = one_thread_with_marks(400'000, 2000);
  auto with = streamed_with_marks(m);
  ASSERT_TRUE(with.has_value());
  EXPECT_EQ(with->first, stable_sorted(m.events));
  EXPECT_EQ(streamed_with_marks<const Ev*>(m), with);
  // At most two flushes wait: the one before the latest mark and the one being read.
  EXPECT_LE(with->second, 2 * 2000u);
  Marked none = m;
  none.marks.clear();
  auto without = streamed_with_marks(none);
  ASSERT_TRUE(without.has_value());
  EXPECT_GE(without->second, 40'000u);
}

TEST(StreamOrder, FlushMarksLetANewThreadBringEventsOfTheLastFlushOnly) {
  Marked m = one_thread_with_marks(60'000, 5000);
  // Thread 2 starts after the mark at event 30 000, with events from before it but after the mark
  // before (a thread whose first flush was the latest one): ordered among thread 1's.
  const uint64_t previous_mark = m.marks[4].second, last_mark = m.marks[5].second;
  ASSERT_EQ(m.marks[5].first, 30'000u);
  Marked late = m;
  late.events.insert(
      late.events.begin() + 30'000,
      {Ev{previous_mark + 1, 2}, Ev{(previous_mark + last_mark) / 2, 2}, Ev{last_mark, 2}});
  for (auto& [at, time] : late.marks)
    if (at > 30'000) at += 3;
  auto got = streamed_with_marks(late);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->first, stable_sorted(late.events));
  EXPECT_EQ(streamed_with_marks<const Ev*>(late), got);
  // An event from flushes back, older than events already replayed (its thread took longer than
  // the marks wait to make it): visited at once, where it was read, never refused once marks were
  // read; everything else keeps its order.
  Marked stale = m;
  stale.events.insert(stale.events.begin() + 30'000, Ev{m.marks[0].second - 1, 2});
  for (auto& [at, time] : stale.marks)
    if (at > 30'000) at += 1;
  auto got_stale = streamed_with_marks(stale);
  ASSERT_TRUE(got_stale.has_value());
  EXPECT_EQ(streamed_with_marks<const Ev*>(stale), got_stale);
  std::vector<size_t> expected = stable_sorted(stale.events);
  std::erase(expected, 30'000u);
  std::vector<size_t> others = got_stale->first;
  auto at = std::find(others.begin(), others.end(), 30'000u);
  ASSERT_NE(at, others.end());
  // Visited before every event read after it, after some read before it.
  EXPECT_GT(at - others.begin(), 0);
  others.erase(at);
  EXPECT_EQ(others, expected);
}

// Marks of a 3.2 writer are exact: a mark lets out everything up to its own time, so one flush
// waits instead of two; a straggler comes to visit.late() with the time already replayed, and is
// counted with how late it was.
TEST(StreamOrder, ExactMarksHoldOneFlushAndCountStragglers) {
  Marked m = one_thread_with_marks(400'000, 2000);
  ga::StreamingTimeOrder<size_t> order;
  order.exact_marks();
  struct Visit {
    std::vector<size_t>* out;
    std::vector<std::pair<size_t, uint64_t>>* stragglers;
    void operator()(size_t e) const { out->push_back(e); }
    void late(size_t e, uint64_t t) const { stragglers->emplace_back(e, t); }
  };
  std::vector<size_t> out;
  std::vector<std::pair<size_t, uint64_t>> late;
  Visit visit{&out, &late};
  size_t next_mark = 0;
  for (size_t i = 0; i < m.events.size(); ++i) {
    for (; next_mark < m.marks.size() && m.marks[next_mark].first == i; ++next_mark)
      order.flush_mark(m.marks[next_mark].second, visit);
    ASSERT_TRUE(order.push(m.events[i].thread, m.events[i].time, i, visit));
    if (i == 100'000) {  // a record made 1 ms after the first event, read 2.5 s later
      ASSERT_TRUE(order.push(7, 1'000'000, SIZE_MAX, visit));
    }
  }
  order.finish(visit);
  EXPECT_EQ(out.size(), m.events.size());
  EXPECT_EQ(out, stable_sorted(m.events));
  EXPECT_LE(order.max_buffered(), 2000u);  // one flush
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].first, SIZE_MAX);
  // Replayed at the time of the last event visited before it was read.
  const uint64_t replayed = late[0].second;
  EXPECT_EQ(order.late_events(), 1u);
  EXPECT_EQ(order.max_lateness(), replayed - 1'000'000);
  EXPECT_GT(replayed, m.events[90'000].time);
  EXPECT_LE(replayed, m.events[100'000].time);
}

TEST(StreamOrder, RefusesRatherThanMisordersALateBatch) {
  // Thread 2's early events arrive after 2 s of thread 1's events (a flush that never came).
  std::vector<Ev> ev;
  for (uint64_t t = 0; t < 20000; ++t) ev.push_back(Ev{1000 + t * 100000, 1});
  for (uint64_t t = 0; t < 10; ++t) ev.push_back(Ev{1500 + t, 2});
  EXPECT_FALSE(streamed(ev).has_value());
  EXPECT_EQ(merged(ev), stable_sorted(ev));  // what the loader falls back to
  // Without order inside a thread either: refused or right, never wrong.
  std::mt19937_64 rng(11);
  std::vector<Ev> chaos;
  for (size_t i = 0; i < 20000; ++i) chaos.push_back(Ev{rng() % 100000, rng() % 3});
  if (std::optional<std::vector<size_t>> got = streamed(chaos)) {
    EXPECT_EQ(*got, stable_sorted(chaos));
  }
}

TEST(StreamOrder, SortsRoundsOfAnyTimeRange) {
  // A round's keys hold its time range above each event's place in the round: ranges of 1 to 64
  // bits, and one too wide for the keys (taken by a plain stable sort), all in stable order.
  std::mt19937_64 rng(5);
  for (int bits : {1, 2, 13, 14, 26, 27, 40, 52, 63, 64}) {
    std::vector<Ev> ev;
    const uint64_t mask = bits == 64 ? UINT64_MAX : (uint64_t{1} << bits) - 1;
    for (size_t i = 0; i < 3000; ++i) ev.push_back(Ev{rng() & mask, rng() % 2 == 0 ? 1u : 2u});
    ev.push_back(Ev{mask, 3});
    ev.push_back(Ev{0, 4});
    for (size_t t : {1u, 2u}) {  // each thread's own events in order, as the shim writes them
      std::vector<uint64_t> times;
      for (const Ev& e : ev)
        if (e.thread == t) times.push_back(e.time);
      std::sort(times.begin(), times.end());
      size_t k = 0;
      for (Ev& e : ev)
        if (e.thread == t) e.time = times[k++];
    }
    std::optional<std::vector<size_t>> got = streamed(ev);  // one round, at the end
    ASSERT_TRUE(got.has_value()) << bits << " bits";
    EXPECT_EQ(*got, stable_sorted(ev)) << bits << " bits";
  }
}

TEST(StreamOrder, PointerEventsPushedOutOfAddressOrderStillSortStably) {
  // The keys name a pointer event by its offset from the first one queued, which needs them in
  // increasing order; pushed otherwise they are sorted by a plain stable sort.
  std::mt19937_64 rng(9);
  std::vector<Ev> push_order = shim_like(rng, 4, 3000, true);
  std::vector<Ev> storage(push_order.rbegin(), push_order.rend());  // the last pushed lowest
  ga::StreamingTimeOrder<const Ev*> order;
  std::vector<size_t> out;
  auto visit = [&](const Ev* e) {
    out.push_back(storage.size() - 1 - static_cast<size_t>(e - storage.data()));
  };
  for (size_t i = 0; i < push_order.size(); ++i) {
    const Ev* e = &storage[storage.size() - 1 - i];
    ASSERT_TRUE(order.push(e->thread, e->time, e, visit));
  }
  order.finish(visit);
  EXPECT_EQ(out, stable_sorted(push_order));
}

namespace {

// Like the shim's file since its flusher merges each flush by time: a flush holds the records made
// by its cut in time order across threads, ending with its mark; now and then a thread's last
// record before the cut was buffered just after its ring was taken (a straggler) and comes first
// in its thread's next batch.
Marked time_ordered_flushes(std::mt19937_64& rng, size_t threads, size_t n,
                            unsigned straggle_percent) {
  Marked m;
  std::vector<std::vector<Ev>> pending(threads);
  std::vector<size_t> held(threads, 0);  // records a thread's batch held over from the last flush
  uint64_t time = 0;
  auto flush = [&] {
    std::vector<Ev> batch;
    for (std::vector<Ev>& p : pending) {
      // Only a record made since the last flush can straggle: it is in the next one for sure.
      const bool fresh = p.size() > (p.empty() ? 0 : held[&p - pending.data()]);
      size_t keep = fresh && rng() % 100 < straggle_percent ? 1 : 0;
      held[&p - pending.data()] = keep;
      batch.insert(batch.end(), p.begin(), p.end() - static_cast<std::ptrdiff_t>(keep));
      p.erase(p.begin(), p.end() - static_cast<std::ptrdiff_t>(keep));
    }
    std::stable_sort(batch.begin(), batch.end(),
                     [](const Ev& a, const Ev& b) { return a.time < b.time; });
    m.events.insert(m.events.end(), batch.begin(), batch.end());
    m.marks.emplace_back(m.events.size(), time);
  };
  for (size_t i = 0; i < n; ++i) {
    time += 1 + rng() % 50;
    const size_t t = rng() % threads;
    pending[t].push_back(Ev{time, t});
    if (rng() % 2000 == 0) flush();
  }
  flush();
  return m;
}

}  // namespace

TEST(StreamOrder, TimeOrderedFlushesWithStragglersSortStably) {
  // Few stragglers: each round is put in order by moving them back; many: past the insertion's
  // budget the round falls back to the radix sort part-way. Both give the stable sort's order.
  std::mt19937_64 rng(13);
  for (unsigned straggle_percent : {0u, 10u, 100u})
    for (size_t threads : {1, 8, 64}) {
      Marked m = time_ordered_flushes(rng, threads, 60000, straggle_percent);
      auto got = streamed_with_marks(m);
      ASSERT_TRUE(got.has_value()) << threads << " threads, " << straggle_percent << "% stragglers";
      EXPECT_EQ(got->first, stable_sorted(m.events))
          << threads << " threads, " << straggle_percent << "%";
      EXPECT_EQ(streamed_with_marks<const Ev*>(m), got);
    }
}

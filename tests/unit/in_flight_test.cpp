// The flush mark's time (shim/record/in_flight.h): the earliest of the flusher's cut and the time
// of every record a thread has read the clock for but not yet buffered.
#include "record/in_flight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace gpumemshim::shim {
namespace {

TEST(InFlightClock, AnIdleThreadLeavesTheCut) {
  InFlightClock clock;
  EXPECT_EQ(clock.bound(100, 40), 100u);
  clock.begin([] { return uint64_t{70}; });
  clock.end();
  EXPECT_EQ(clock.bound(100, 40), 100u);
}

TEST(InFlightClock, ARecordBeingMadeLowersTheMarkToItsTime) {
  InFlightClock clock;
  EXPECT_EQ(clock.begin([] { return uint64_t{70}; }), 70u);
  EXPECT_EQ(clock.bound(100, 40), 70u);
  EXPECT_EQ(clock.bound(60, 40), 60u);  // a lower mark stays
  clock.begin([] { return uint64_t{0}; });  // time 0 is a time, not idle
  EXPECT_EQ(clock.bound(100, 40), 0u);
  clock.reset();
  EXPECT_EQ(clock.bound(100, 40), 100u);
}

TEST(InFlightClock, AThreadCaughtReadingTheClockGetsThePreviousMark) {
  InFlightClock clock;
  uint64_t seen = 0;
  // The flusher looks while the thread is inside its clock read: the time is not known yet.
  clock.begin([&] {
    seen = clock.bound(100, 40);
    return uint64_t{90};
  });
  EXPECT_EQ(seen, 40u);
}

// The protocol as the shim runs it: threads read the clock, are sometimes held before buffering
// the record (what preemption does), and buffer it; a flusher cuts, computes the mark, takes from
// every buffer the records made by the cut, and checks that nothing it takes later is older than a
// mark it wrote before. The cut alone as the mark is what the straggler count shows would fail.
TEST(InFlightClock, NoRecordTakenAfterAMarkIsOlderThanTheMark) {
  constexpr int kThreads = 4;
  constexpr int kRecords = 20000;
  const auto start = std::chrono::steady_clock::now();
  auto now = [start] {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now() - start)
                                     .count());
  };
  struct Buffer {
    InFlightClock in_flight;
    std::mutex lock;
    std::vector<uint64_t> times;  // buffered, not yet taken
  };
  std::vector<Buffer> buffers(kThreads);
  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Buffer& b = buffers[t];
      for (int i = 0; i < kRecords; ++i) {
        uint64_t time = b.in_flight.begin(now);
        if (i % 256 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
        {
          std::lock_guard<std::mutex> hold(b.lock);
          b.times.push_back(time);
        }
        b.in_flight.end();
      }
      running.fetch_sub(1);
    });
  }
  uint64_t previous_mark = 0, previous_cut = 0, mark_written = 0;
  size_t taken = 0, flushes = 0, older_than_mark = 0, stragglers = 0;
  for (bool last = false; !last;) {
    last = running.load() == 0;
    const uint64_t cut = last ? UINT64_MAX : now();
    InFlightClock::fence_after_cut();
    uint64_t mark = cut;
    for (Buffer& b : buffers) mark = b.in_flight.bound(mark, previous_mark);
    previous_mark = mark;
    for (Buffer& b : buffers) {
      std::lock_guard<std::mutex> hold(b.lock);
      size_t n = 0;
      while (n < b.times.size() && b.times[n] <= cut) ++n;
      for (size_t i = 0; i < n; ++i) {
        older_than_mark += b.times[i] < mark_written;
        stragglers += b.times[i] < previous_cut;
      }
      taken += n;
      b.times.erase(b.times.begin(), b.times.begin() + static_cast<std::ptrdiff_t>(n));
    }
    EXPECT_GE(mark, mark_written) << "marks go forward";
    mark_written = mark;
    previous_cut = cut;
    ++flushes;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(taken, size_t{kThreads} * kRecords);
  EXPECT_EQ(older_than_mark, 0u);
  EXPECT_GT(flushes, 10u);
  // Records made before a cut and buffered after the flush took their buffer: the window exists.
  EXPECT_GT(stragglers, 0u);
}

}  // namespace
}  // namespace gpumemshim::shim

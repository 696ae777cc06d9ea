// Batches handed from one thread to another, in order, at most `capacity` waiting: the producer
// waits when the consumer lags, the consumer when there is nothing to do. Emptied batches go back
// to the producer (recycle / spare), so a long stream allocates a few batches, not one per hand-off.
// abort() (either side) wakes both for good: push returns false, pop returns nothing. The consumer
// may lend its idle time to other work (pop's idle).
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace gpumemshim::analyzer {

template <typename Item>
class BatchChannel {
 public:
  using Batch = std::vector<Item>;
  explicit BatchChannel(size_t capacity) : capacity_(capacity) {}

  // Producer: false once aborted (the batch is dropped).
  bool push(Batch batch) {
    std::unique_lock lock(mutex_);
    not_full_.wait(lock, [&] { return full_.size() < capacity_ || aborted_; });
    if (aborted_) return false;
    full_.push_back(std::move(batch));
    not_empty_.notify_one();
    return true;
  }
  // Producer: no more batches.
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    not_empty_.notify_all();
  }
  // Producer: an emptied batch to fill again (empty when none came back yet).
  Batch spare() {
    std::lock_guard lock(mutex_);
    if (empty_.empty()) return {};
    Batch b = std::move(empty_.back());
    empty_.pop_back();
    return b;
  }

  // Consumer: the next batch; nothing once closed and drained, or aborted. While none is there,
  // the consumer does idle() (which returns whether it found anything to do) until it finds
  // nothing, and then waits.
  template <typename Idle>
  std::optional<Batch> pop(Idle&& idle) {
    std::unique_lock lock(mutex_);
    const auto ready = [&] { return !full_.empty() || closed_ || aborted_; };
    while (!ready()) {
      lock.unlock();
      const bool worked = idle();
      lock.lock();
      if (!worked) not_empty_.wait(lock, ready);
    }
    if (aborted_ || full_.empty()) return std::nullopt;
    Batch b = std::move(full_.front());
    full_.pop_front();
    not_full_.notify_one();
    return b;
  }
  // Consumer: a batch it is done with.
  void recycle(Batch batch) {
    batch.clear();
    std::lock_guard lock(mutex_);
    empty_.push_back(std::move(batch));
  }

  void abort() {
    std::lock_guard lock(mutex_);
    aborted_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable not_full_, not_empty_;
  std::deque<Batch> full_;
  std::vector<Batch> empty_;
  size_t capacity_;
  bool closed_ = false;
  bool aborted_ = false;
};

}  // namespace gpumemshim::analyzer

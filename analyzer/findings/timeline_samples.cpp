#include "findings/timeline_samples.h"

#include <algorithm>
#include <bit>

namespace gpumemshim::analyzer {

namespace {
std::pair<uint64_t, uint64_t> key(const SampledPoint& p) { return {p.live_bytes, p.allocated_bytes}; }
}  // namespace

void SampledBucket::merge(SampledBucket&& b) {
  if (key(b.low) < key(low)) low = std::move(b.low);
  if (key(b.high) > key(high)) high = std::move(b.high);
}

void TimelineSampler::next_bucket(const Mark& first) {
  if (bucket_width_ != 0) close_bucket();
  index_ = first.time_ns >> shift_;  // after close_bucket: it may have widened the buckets
  bucket_start_ = index_ << shift_;
  bucket_width_ = uint64_t{1} << shift_;
  low_ = high_ = first;
  // The journal held the closed bucket's changes and this event's: all in base_ now.
  low_.journal_pos = high_.journal_pos = journal_.size();
}

SampledPoint TimelineSampler::capture(const Mark& m) {
  SampledPoint p{m.seq, m.time_ns, m.live, m.reserved, m.allocated, {}, {}};
  size_t n = 0;
  for (const uint64_t word : nonzero_) n += static_cast<size_t>(std::popcount(word));
  // A pair takes two words: every site's bytes are no bigger once half of them hold any.
  if (2 * n >= base_.size()) {
    p.dense.assign(base_.begin(), base_.end());
    return p;
  }
  p.sites.reserve(n);
  // By the bitmap of sites holding bytes: a few thousand sites, most of them empty at any moment.
  for (size_t w = 0; w < nonzero_.size(); ++w) {
    for (uint64_t bits = nonzero_[w]; bits != 0; bits &= bits - 1) {
      const auto site = static_cast<uint32_t>(w * 64 + static_cast<size_t>(std::countr_zero(bits)));
      p.sites.emplace_back(site, base_[site]);
    }
  }
  return p;
}

// Replays the bucket's journal onto its first state, capturing the state at the low and the high.
void TimelineSampler::close_bucket() {
  SampledBucket b;
  b.index = index_;
  const Mark* marks[2] = {&low_, &high_};
  if (high_.journal_pos < low_.journal_pos) std::swap(marks[0], marks[1]);
  size_t applied = 0;
  auto apply_to = [&](size_t pos) {
    // Every site the journal names is in base_ first (sites()): the loop then keeps its state in
    // registers.
    if (base_.size() < site_count_) {
      base_.resize(site_count_, 0);
      nonzero_.resize(base_.size() / 64 + 1, 0);
    }
    const std::pair<uint32_t, uint64_t>* change = journal_.data() + applied;
    const std::pair<uint32_t, uint64_t>* const end = journal_.data() + pos;
    uint64_t* const base = base_.data();
    uint64_t* const nonzero = nonzero_.data();
    for (; change != end; ++change) {
      const auto [site, bytes] = *change;
      base[site] = bytes;
      const uint64_t bit = uint64_t{1} << (site & 63);
      uint64_t& word = nonzero[site >> 6];
      word = (word & ~bit) | (bit & (uint64_t{0} - static_cast<uint64_t>(bytes != 0)));  // no branch
    }
    applied = pos;
  };
  for (const Mark* m : marks) {
    apply_to(m->journal_pos);
    (m == &low_ ? b.low : b.high) = capture(*m);
    if (low_.seq == high_.seq) {
      b.high = b.low;
      break;
    }
  }
  apply_to(journal_.size());
  journal_.clear();
  bucket_width_ = 0;
  if (!buckets_.empty() && buckets_.back().index == b.index) buckets_.back().merge(std::move(b));
  else buckets_.push_back(std::move(b));
  while (buckets_.size() > kMaxBuckets) widen();
}

void halve_buckets(std::vector<SampledBucket>& buckets) {
  size_t out = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    buckets[i].index /= 2;
    if (out > 0 && buckets[out - 1].index == buckets[i].index) buckets[out - 1].merge(std::move(buckets[i]));
    else if (out != i) buckets[out++] = std::move(buckets[i]);
    else ++out;
  }
  buckets.resize(out);
}

void TimelineSampler::widen() {
  ++shift_;
  halve_buckets(buckets_);
}

void TimelineSampler::finish() {
  if (bucket_width_ != 0) close_bucket();
}

}  // namespace gpumemshim::analyzer

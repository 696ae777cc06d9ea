#include "gpumemshim/analyzer/timeline_samples.h"

namespace gpumemshim::analyzer {

namespace {
std::pair<uint64_t, uint64_t> key(const SampledPoint& p) { return {p.live_bytes, p.allocated_bytes}; }
}  // namespace

void SampledBucket::merge(SampledBucket&& b) {
  if (key(b.low) < key(low)) low = std::move(b.low);
  if (key(b.high) > key(high)) high = std::move(b.high);
}

void TimelineSampler::next_bucket(uint64_t time_ns) {
  if (open_) close_bucket();
  open_ = true;
  index_ = time_ns >> shift_;  // after close_bucket: it may have widened the buckets
  low_set_ = high_set_ = false;
}

SampledPoint TimelineSampler::capture(const Mark& m) {
  SampledPoint p{m.seq, m.time_ns, m.live, m.reserved, m.allocated, {}};
  p.sites.reserve(last_capture_size_);
  for (size_t s = 0; s < base_.size(); ++s)
    if (base_[s]) p.sites.emplace_back(static_cast<uint32_t>(s), base_[s]);
  last_capture_size_ = p.sites.size() + p.sites.size() / 8;
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
    for (; applied < pos; ++applied) {
      auto [site, bytes] = journal_[applied];
      if (site >= base_.size()) base_.resize(site + 1, 0);
      base_[site] = bytes;
    }
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
  open_ = false;
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
  if (open_) close_bucket();
}

}  // namespace gpumemshim::analyzer

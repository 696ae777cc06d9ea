#include "flush_order.h"

#include <cstring>

#include "gpumemshim/format/record_extent.h"

namespace gpumemshim::shim {

namespace {

using format::RecordExtent;

// Moves c to the end of its batch's next timed record (or of the batch) and reads that time.
// A tail that does not parse is taken as one untimed run (it is written as it is).
void find_next_timed(const ThreadBatch& b, MergeCursor& c) {
  size_t at = c.pos;
  RecordExtent r;
  while (at < b.size) {
    if (!format::record_extent(b.bytes + at, b.size - at, r)) break;
    at += r.size;
    if (r.timed) {
      c.next_time = r.time_ns;
      c.next_end = at;
      return;
    }
  }
  c.next_time = UINT64_MAX;
  c.next_end = b.size;
}

bool before(const MergeCursor& a, const MergeCursor& b) {
  return a.next_time != b.next_time ? a.next_time < b.next_time : a.batch < b.batch;
}

// A binary min-heap of cursors ordered by before().
void sift_down(MergeCursor* heap, size_t n, size_t i) {
  for (;;) {
    size_t least = i, l = 2 * i + 1, r = l + 1;
    if (l < n && before(heap[l], heap[least])) least = l;
    if (r < n && before(heap[r], heap[least])) least = r;
    if (least == i) return;
    MergeCursor t = heap[i];
    heap[i] = heap[least];
    heap[least] = t;
    i = least;
  }
}

}  // namespace

size_t bytes_made_by(const uint8_t* bytes, size_t size, uint64_t cut) {
  size_t at = 0;
  RecordExtent r;
  while (at < size) {
    if (!format::record_extent(bytes + at, size - at, r)) return size;
    if (r.timed && r.time_ns > cut) return at;
    at += r.size;
  }
  return size;
}

size_t merge_by_time(const ThreadBatch* batches, size_t count, MergeCursor* cursors, uint8_t* out) {
  size_t n = 0;
  for (size_t i = 0; i < count; ++i) {
    if (batches[i].size == 0) continue;
    cursors[n].batch = static_cast<uint32_t>(i);
    cursors[n++].pos = 0;
  }
  if (n == 1) {  // one thread brought records: nothing to merge
    const ThreadBatch& b = batches[cursors[0].batch];
    std::memcpy(out, b.bytes, b.size);
    return b.size;
  }
  for (size_t i = 0; i < n; ++i) find_next_timed(batches[cursors[i].batch], cursors[i]);
  for (size_t i = n / 2; i-- > 0;) sift_down(cursors, n, i);
  size_t written = 0;
  while (n > 0) {
    MergeCursor& c = cursors[0];
    const ThreadBatch& b = batches[c.batch];
    // The whole run of this batch's records that stays ahead of every other batch: one copy.
    const MergeCursor* second = nullptr;
    if (n > 1) second = n > 2 && before(cursors[2], cursors[1]) ? &cursors[2] : &cursors[1];
    const size_t from = c.pos;
    do {
      c.pos = c.next_end;
      if (c.pos < b.size) find_next_timed(b, c);
    } while (c.pos < b.size && (!second || before(c, *second)));
    std::memcpy(out + written, b.bytes + from, c.pos - from);
    written += c.pos - from;
    if (c.pos == b.size) cursors[0] = cursors[--n];
    sift_down(cursors, n, 0);
  }
  return written;
}

}  // namespace gpumemshim::shim

// One periodic flush written in time order across threads. Each thread's ring holds its records in
// the order it made them; written ring after ring, a flush would interleave every thread's 50 ms
// and the analyzer would sort each flush back into time order (the largest part of its read). The
// flusher instead takes from each ring the records made by its cut time and merges them by time,
// so a trace written while the flusher keeps up is in time order but for a few stragglers (a record
// made just before a cut and buffered just after its ring was taken). Readers must not rely on it:
// it is what makes the common case fast, not a format rule.
//
// Plain functions on buffers (no rings, no files): unit-tested on their own. No allocation.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gpumemshim::shim {

// The records one thread made since its last flush, copied out of its ring: whole records in the
// order the thread wrote them.
struct ThreadBatch {
  const uint8_t* bytes = nullptr;
  size_t size = 0;
};

// The merge's state per batch; the caller provides one per batch.
struct MergeCursor {
  uint64_t next_time = 0;  // of the batch's next timed record; UINT64_MAX: only untimed ones left
  size_t pos = 0;          // where the batch's unwritten records begin
  size_t next_end = 0;     // the end of its next timed record (or of the batch)
  uint32_t batch = 0;
};

// How many leading bytes of `bytes` a flush cut at `cut` writes: every record up to the first one
// made after the cut (an untimed record, such as a stack, is written with what precedes it, which
// keeps it ahead of its first use). Bytes that do not parse as whole records are all written.
size_t bytes_made_by(const uint8_t* bytes, size_t size, uint64_t cut);

// Writes the batches' records to `out` (room for all of them) in time order across batches: each
// batch's records keep their order, the untimed ones going just before the next timed record of
// their batch; equal times go to the lower batch. Returns the bytes written (the batches' total).
size_t merge_by_time(const ThreadBatch* batches, size_t count, MergeCursor* cursors, uint8_t* out);

}  // namespace gpumemshim::shim

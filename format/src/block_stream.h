// Format 3's blocks (block.h) as one stream of records. scan_blocks() walks the block headers of a
// file (resynchronising past bytes that are no block); a BlockStream then checks and decompresses
// the blocks those headers describe on threads of their own, ahead of the reader (with one usable
// core or a stream of at most 1 MiB: the reader itself, a block at a time, as it gets to it; the
// reader also takes the next block itself whenever it would otherwise wait for them; without
// threads, the sink's thread may share the reader's work through ReadHelp), into
// one anonymous mapping laid out contiguously in file order. The reader reads records there as it
// reads a 2.x file, and releases the pages behind it (release), whose memory the next blocks
// reuse: the queued events point into the mapping, so a block's bytes stay where they were
// written until the reader lets them go.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "decoder.h"
#include "gpumemshim/format/block.h"
#include "gpumemshim/format/records.h"
#include "gpumemshim/format/trace_reader.h"

struct ZSTD_DCtx_s;
typedef struct ZSTD_DCtx_s ZSTD_DCtx;

namespace gpumemshim::format {

struct BlockRef {
  uint64_t offset = 0;  // of the block header in the file
  BlockHeader header;
};

// What the headers say, before any payload is read.
struct BlockScan {
  uint32_t flags = 0;            // the file header's
  uint32_t write_error = 0;      // the file header's
  std::vector<BlockRef> blocks;  // headers that verify, whose payload is in the file, in sequence
  uint64_t raw_bytes = 0;        // the blocks' raw sizes added up
  uint64_t missing_blocks = 0;   // sequence numbers skipped
  uint64_t first_gap_offset = UINT64_MAX;  // the header after the first gap
  uint64_t out_of_sequence = 0;  // headers that verify but repeat or go back a number: not read
  uint64_t out_of_sequence_offset = UINT64_MAX;
  uint64_t junk_bytes = 0;  // bytes that are no block: damage, or junk between blocks
  uint64_t first_junk_offset = UINT64_MAX;
  bool truncated = false;        // the file ends inside a block
  uint64_t truncated_at = 0;     // that block's offset
  uint64_t truncated_bytes = 0;  // from there to the end of the file
};

// file: the trace's read-only mapping, whose pages the scan drops from the process as it passes
// them (PassedPages): the headers are spread over the whole file, and read-ahead and fault-around
// would otherwise leave all of it resident before the read begins.
BlockScan scan_blocks(std::span<const uint8_t> file);

// What the stream's checks found: final once the stream ended (BlockStream::finish).
struct BlockResults {
  uint64_t good_blocks = 0;
  uint64_t good_records = 0;
  uint64_t raw_bytes = 0;        // the good blocks' records, decompressed
  uint64_t damaged_blocks = 0;   // payload checksum, decompression or a record failed
  uint64_t damaged_records = 0;  // their headers' record counts
  uint64_t damaged_bytes = 0;
  uint64_t first_damaged_offset = UINT64_MAX;
  bool ended = false;  // an End record was read (in a good block)
  EndRecord end;
  uint64_t blocks_before_end = 0;   // good blocks before the End's
  uint64_t records_before_end = 0;  // good records before the End
};

class BlockStream final : public ReadHelp {
 public:
  // read_threads: TraceReader::set_read_threads's, if set. sink_helps: the sink's
  // wants_read_help(), taken when no read thread is started (see helped()).
  BlockStream(const BlockScan& scan, std::span<const uint8_t> file, Version version,
              std::optional<unsigned> read_threads, bool sink_helps = false);
  ~BlockStream();
  BlockStream(const BlockStream&) = delete;
  BlockStream& operator=(const BlockStream&) = delete;

  // Where the records go: the queued events point here. Its first ready() bytes are whole records.
  std::span<const uint8_t> region() const { return {region_, region_size_}; }
  // The reader has read up to `at`: waits until more is ready or the stream ended; returns how
  // much is ready (== at: nothing more).
  uint64_t wait_beyond(uint64_t at);
  // The reader has read up to `at`: the read threads may run that much further ahead.
  void consumed(uint64_t at);
  // The reader is done with the region below `upto`: its whole huge pages are kept to be moved
  // where the next blocks go (see back_pages), or given back.
  void release(uint64_t upto);
  // Takes or waits for every block still unchecked and returns what the checks found.
  const BlockResults& finish();

  // Whether another thread may share the reader's block work through help(): the sink wants to,
  // there are no read threads, and the stream is worth sharing (see kInline).
  bool helped() const { return helped_; }
  // ReadHelp: the helper checks the next block into its place when it may be claimed, as a read
  // thread does; the reader takes the others.
  bool help() override;

 private:
  // What checking a block found.
  struct Checked {
    bool good = false;
    uint32_t end_index = UINT32_MAX;  // the End record's place in the block, if it has one
    EndRecord end;
  };
  // A block's place in the region were no block damaged, and what its worker found there.
  struct Slot {
    uint64_t at = 0;
    bool done = false;  // under mu_
    Checked checked;
  };

  void work(ZSTD_DCtx* dctx);
  bool may_claim() const;
  void check_next(std::unique_lock<std::mutex>& lock, ZSTD_DCtx* dctx);
  void commit_done();
  void commit(const Checked& c, uint64_t written_at);
  void back_pages(uint64_t end);
  void remap_if_unmapped(uint8_t* at);
  void drop_page(uint64_t at);
  static bool own_dctx(ZSTD_DCtx*& own, const BlockRef& b);
  ZSTD_DCtx* reader_dctx(const BlockRef& b);
  void check_block(const BlockRef& b, ZSTD_DCtx* dctx, uint8_t* dst, Checked& out);
  bool block_is_good(const BlockRef& b, ZSTD_DCtx* dctx, uint8_t* dst, uint32_t& end_index,
                     EndRecord& end);

  // Decompressed bytes up to which the reader takes the blocks itself, whatever the cores.
  static constexpr uint64_t kInline = 1ull << 20;
  // Released pages kept for the next blocks: the reader releases a few megabytes at a time (the
  // trace reader's kReleaseEvery), and the blocks written meanwhile take them.
  static constexpr size_t kKeptPages = 8;

 public:
  // The region's alignment, and the unit in which the reader gives its pages back.
  static constexpr uint64_t kHugePage = 2ull << 20;
  // Decompressed bytes held ahead of the reader: a block larger than this is still taken once
  // the reader has caught up.
  static constexpr uint64_t kAhead = 32ull << 20;

 private:
  const BlockScan& scan_;
  std::span<const uint8_t> file_;
  Version version_;
  uint8_t* mapping_ = nullptr;  // region_, aligned, lies in it
  size_t mapping_size_ = 0;
  uint8_t* region_ = nullptr;
  size_t region_size_ = 0;
  ZSTD_DCtx* dctx_ = nullptr;  // the reader's own
  std::vector<Slot> slots_;    // with workers or a helper: blocks are claimed under mu_
  std::vector<ZSTD_DCtx*> worker_dctx_;
  std::vector<std::thread> workers_;
  bool helped_ = false;
  ZSTD_DCtx* helper_dctx_ = nullptr;  // the helper's own
  // Under mu_: what checking a block threw on another thread (no memory), for the reader to throw.
  std::exception_ptr error_;
  std::mutex mu_;
  std::condition_variable ready_cv_, room_cv_;
  // Under mu_ with slots (the reader's own without): blocks claimed by a worker, blocks committed
  // in order, the region's bytes committed (the reader may read that far), what the reader has
  // read, and the compressed file's pages released so far.
  size_t claimed_ = 0;
  size_t committed_ = 0;
  uint64_t produced_ = 0;
  uint64_t consumed_ = 0;
  bool stop_ = false;
  PassedPages file_read_;  // the compressed pages committed
  // Under mu_ with slots: pages the reader released whose memory is kept (their offsets in the
  // region), the region's offset below which they were released, and the offset below which
  // every page was given a kept page or left to the kernel before anything was written there.
  std::vector<uint64_t> kept_pages_;
  uint64_t released_ = 0;
  uint64_t backed_ = 0;
  bool move_pages_ = true;  // false once a move failed (a kernel before 5.7)
  BlockResults results_;    // final once every block is committed
};

}  // namespace gpumemshim::format

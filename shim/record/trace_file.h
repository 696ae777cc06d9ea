// The one output file of this process: name from the pattern, header, process and module records.
// Records written here bypass the per-thread rings; like everything after the header they go
// through the file's block writer (one block for the first records, one per module scan).
#pragma once
#include <cstddef>
#include <cstdint>

#include "block_writer.h"

namespace gpumemshim::shim {

class RecordBatch;

// Expands %p %h %r %t %% of the pattern; false if the result does not fit.
bool expand_output_pattern(const char* pattern, char* out, size_t capacity);

class TraceFile {
 public:
  // Opens a fresh regular file for this process (an existing regular file of that name is kept: a
  // suffix is added, so exec and pid reuse never clobber a trace; a name that exists as anything
  // else, a device, directory, symlink or fifo, is refused). Writes the header and the first block:
  // process, attribute and module records. Returns false after one warning when the file cannot be
  // written.
  bool open(const char* pattern, uint64_t start_mono_ns);
  const char* path() const { return path_; }
  BlockWriter& blocks() { return blocks_; }
  // Emits module records for objects loaded since the last call, as one block (cheap when nothing
  // changed).
  void write_new_modules();
  // In a forked child: forget the parent's file without touching it.
  void forget_after_fork();
  void close();

 private:
  bool create(const char* base);
  void write_process_record(uint64_t start_mono_ns);
  void write_module_scan(RecordBatch& batch);

  BlockWriter blocks_;
  int fd_ = -1;
  char path_[1100] = {};
  unsigned long long modules_seen_adds_ = 0;
};

}  // namespace gpumemshim::shim

// The one output file of this process: name from the pattern, header, process and module records.
// Records written here bypass the per-thread rings (one write(2) each, whole records).
#pragma once
#include <cstddef>
#include <cstdint>

namespace gpumemshim::shim {

// Expands %p %h %r %t %% of the pattern; false if the result does not fit.
bool expand_output_pattern(const char* pattern, char* out, size_t capacity);

class TraceFile {
 public:
  // Opens a fresh file for this process (an existing file of that name is kept: a suffix is added,
  // so exec and pid reuse never clobber a trace). Writes header and process record. Returns false
  // after one warning when the file cannot be written.
  bool open(const char* pattern, uint64_t start_mono_ns);
  int fd() const { return fd_; }
  const char* path() const { return path_; }
  // Writes one complete record (or several) with a single write(2).
  void write_direct(const uint8_t* bytes, size_t n) const;
  // Emits module records for objects loaded since the last call (cheap when nothing changed).
  void write_new_modules();
  // In a forked child: forget the parent's file without touching it.
  void forget_after_fork();
  void close();

 private:
  void write_process_record(uint64_t start_mono_ns);

  int fd_ = -1;
  char path_[1100] = {};
  unsigned long long modules_seen_adds_ = 0;
};

}  // namespace gpumemshim::shim

#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpumemshim::analyzer {

struct ModuleInfo {
  std::string path;         // as the loader saw it (the shim writes the real path of the main program)
  std::string build_id;     // raw bytes of the GNU build-id note (may be empty)
  uint64_t load_bias = 0;   // dlpi_addr from dl_iterate_phdr
  uint64_t start = 0;       // lowest mapped address (load_bias + min PT_LOAD p_vaddr)
  uint64_t size = 0;        // span of PT_LOAD segments
};

struct SourceFrame {
  std::string function;  // demangled; "" if unknown
  std::string file;      // full path from DWARF; "" if unknown
  uint32_t line = 0;
  std::string module;    // module path ("" if the pc is in no known module)
  uint64_t pc = 0;
  bool inlined = false;  // true for frames that were inlined into the next (outer) one
};

// Offline symbolizer over elfutils libdwfl. Not thread-safe: use one instance per thread
// (or guard it with a mutex).
class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;
  Symbolizer(Symbolizer&&) noexcept;
  Symbolizer& operator=(Symbolizer&&) noexcept;

  void add_module(const ModuleInfo& m);  // may be called many times; same path+bias twice is a no-op

  // Innermost first: inlined frames, then the containing function. For return addresses (every
  // frame of a backtrace except the innermost) look up pc-1 so the call's line is reported.
  // Results cached per pc. Never throws; unknown → one frame with module (and function from the
  // ELF symbol table if available, else "").
  std::vector<SourceFrame> symbolize(uint64_t pc, bool is_return_address);

  const ModuleInfo* module_for(uint64_t pc) const;  // nullptr if none

  // Opens the module holding pc and reads its DWARF, its address index and its symbol table now,
  // as the first symbolize() in it would: for doing that ahead, on another thread (SymbolWarmup).
  // Once per module; never throws.
  void prepare(uint64_t pc);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpumemshim::analyzer

// Device memory by library: every device allocation attributed to the shared object (or program)
// that asked CUDA for it, so "what else is on my GPU" has an answer next to the framework's own
// memory. Frameworks' allocators (PyTorch, CuPy, XLA) are rows like any other library: their
// blocks are reported elsewhere; here it is what their pools hold from the device.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "gpumemshim/analyzer/report.h"
#include "replay/load.h"

namespace gpumemshim::analyzer {

class StackView;

// Who a module (the path of the innermost native frame outside the shim and CUDA) is: name, role
// (LibraryMemory::role) and module file name. `executable` is the process's own path.
inline constexpr std::string_view kCupyPool = "CuPy (memory pool)";
struct LibraryIdentity {
  std::string name, role, module;
};
LibraryIdentity identify_library(std::string_view module, std::string_view executable);

// One row per library that held device memory, at_peak_bytes then own peak descending. A library's
// own peak comes from the replay's log of site changes; when that log overflowed it is known only
// for libraries of one raw site (else nullopt: a second read of the trace is not worth a table).
std::vector<LibraryMemory> find_libraries(const LoadedTrace& trace, StackView& stacks);

// The process's row of that name (ProcessReport::libraries), or null.
const LibraryMemory* find_library(const ProcessReport& p, std::string_view name);

}  // namespace gpumemshim::analyzer

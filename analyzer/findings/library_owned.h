// Library-owned memory: what a GPU library allocates for itself when a handle, plan, communicator
// or workspace is made (cublasCreate_v2, ncclCommInitRank, PyTorch's cuBLAS workspaces) and keeps
// for the life of the process by design. Such memory is never the script's leak. It is told by the
// allocation's native frames, matched against one table (library_owned.cpp).
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpumemshim/analyzer/report.h"

namespace gpumemshim::analyzer {

struct LibraryOwner {
  std::string_view id;       // "cublas", "cublaslt", "cudnn", "cusparse", "cusolver", "cufft",
                             // "nccl", "torch"
  std::string_view library;  // as reports name it: "cuBLAS", "PyTorch"
  std::string_view what;     // "handle", "cuBLAS workspace", "communicator buffers"
  std::string call;          // the library function that made it (its frame's name, no arguments)
  size_t frame = 0;          // index of the outermost frame of the library's own code
};

// The library whose own memory an allocation is, from its native frames (innermost first, the
// shim's frames dropped), or nullopt when it is not (or not known to be) library-owned. The walk
// goes outward from the allocation through CUDA's, PyTorch's and the libraries' own frames to the
// first frame named in the table (or, for a library owned by its module, to the last frame of that
// module); any other frame on the way (the program's, the interpreter's: a callback) means the
// allocation is the caller's.
std::optional<LibraryOwner> library_owner(const std::vector<Frame>& native);

// True for a frame of a library in the table: in one of its modules, or one of its named calls.
bool is_library_frame(const Frame& frame);

// The frames that show where the library made it: the library's own frames up to the one that
// decided (CUDA's and PyTorch's machinery between them left out). For a stack shown as a label (a
// grad_fn) these go first, so the label never hides the library.
std::vector<Frame> library_frames(const std::vector<Frame>& native, const LibraryOwner& owner);

}  // namespace gpumemshim::analyzer

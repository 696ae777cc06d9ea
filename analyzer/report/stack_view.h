// Turns a trace's stack ids into symbolized frames: the shim's own frames dropped, inlined frames
// kept, capped. One instance per process (its module map).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "findings/library_owned.h"
#include "replay/load.h"
#include "replay/model.h"
#include "symbolize/symbolizer.h"

namespace gpumemshim::analyzer {

inline constexpr size_t kMaxOutputFrames = 32;

class StackView {
 public:
  explicit StackView(const LoadedTrace& trace, size_t max_frames = kMaxOutputFrames);
  size_t max_frames() const { return max_frames_; }
  // Symbolized frames of a stack id, innermost user frame first; empty for id 0 or unknown ids.
  const std::vector<Frame>& frames(uint64_t stack_id);
  // A key that identifies the symbolized stack across runs (no raw addresses unless unknown,
  // and then module-relative).
  static std::string stable_key(const std::vector<Frame>& frames);
  // stable_key(frames(stack_id)), made once per stack id (every finding asks for its sites' keys).
  const std::string& stable_key(uint64_t stack_id);
  // The library whose own memory an allocation with this stack is (library_owned.h), judged on the
  // native frames the shim recorded (an attributed stack's own frames); nullopt when none.
  const std::optional<LibraryOwner>& library_owner(uint64_t stack_id);
  // The module (its path) of the innermost native frame outside the shim and CUDA itself: the
  // shared object or program that asked CUDA for the memory; "" when no native frame was recorded.
  const std::string& asking_module(uint64_t stack_id);

 private:
  // What one pc gives, made once per pc and position (a return address is looked up at pc-1):
  // its module, whether that is the shim, and once asked for, its frames (inlined frames first,
  // then the function).
  struct PcFrames {
    const ModuleInfo* module = nullptr;
    bool shim = false;
    bool symbolized = false;
    std::vector<Frame> frames;
  };
  PcFrames& pc_entry(uint64_t pc, bool is_return_address);
  const std::vector<Frame>& symbolized(PcFrames& entry, uint64_t pc, bool is_return_address);
  // One group per pc, the shim's frames skipped: pointers into pc_frames_.
  std::vector<const std::vector<Frame>*> native_groups(const std::vector<uint64_t>& pcs);
  std::vector<Frame> raw_frames(uint64_t stack_id);
  std::vector<Frame> attributed_frames(uint64_t own_id, uint64_t caller_id);
  std::vector<Frame> labeled_frames(uint64_t stack_id, const std::string& label);
  // The frames of the library that made an allocation (raw: raw_frames(own_id)), to show above a
  // grad_fn; empty when none.
  std::vector<Frame> owner_frames(uint64_t own_id, const std::vector<Frame>& raw);

  const LoadedTrace& trace_;
  size_t max_frames_;
  Symbolizer symbolizer_;
  std::unordered_map<uint64_t, PcFrames> pc_frames_[2];  // [is_return_address]
  std::unordered_map<uint64_t, std::vector<Frame>> cache_;
  std::unordered_map<uint64_t, std::string> keys_;
  std::unordered_map<uint64_t, std::optional<LibraryOwner>> owners_;
  std::unordered_map<uint64_t, std::string> askers_;
};


// True for frames inside CUDA itself (shared runtime or driver, a static cudart's internals, the
// cudaMalloc<T> templates of cuda_runtime.h): dropped above the caller's first frame.
bool is_cuda_internal(const Frame& frame);

// JAX's and CuPy's native code between the Python line and CUDA, told by the package folders
// they are installed in: XLA (jaxlib, its CUDA plugin), and CuPy's Cython modules.
bool is_xla_module(std::string_view path);
bool is_cupy_module(std::string_view path);

// True for native frames of the Python/PyTorch machinery between a Python line and a CUDA call
// (libc10*, libtorch*, torch's _C, XLA, CuPy, the interpreter, ctypes/libffi) and CUDA's own
// frames: dropped above the first Python frame.
bool is_framework_frame(const Frame& frame);

// True for Python frames of the framework itself (torch's package, gpumemshim's wrappers, frozen
// importlib): dropped above the script's first line.
bool is_framework_python_frame(const Frame& frame);

// True for native frames of the Python interpreter, libffi and _ctypes: dropped when the stack has
// Python frames (those say the same thing at the Python level).
bool is_python_internal(const Frame& frame);

// True for the native frame of one CPython evaluation loop invocation (_PyEval_EvalFrameDefault),
// which a stack's Python frames of that invocation replace.
bool is_python_eval(const Frame& frame);

}  // namespace gpumemshim::analyzer

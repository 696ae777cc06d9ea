// Python frames of the calling thread, read without the GIL, without linking libpython and without
// creating Python objects: the allocating thread usually does not hold the GIL (torch's op bindings
// release it), and taking it would cost the training step far more than the walk. Only
// exactly-recognised CPython layouts are read (3.11, 3.12); any other version gets one info line
// and native stacks only.
#pragma once
#include <cstddef>
#include <cstdint>

#include "gpumemshim/format/records.h"

namespace gpumemshim::shim {

inline constexpr uint32_t kMaxPythonFrames = 128;

// This thread's Python frames, innermost first: code_id, instruction offset (code units) and the
// entry flag (outermost frame of one _PyEval_EvalFrameDefault invocation). `codes[i]` is the code
// object of frame i, for describe_python_code. Returns 0 when the process runs no (supported)
// Python or the thread has no Python frames. Cheap when Python is absent: one relaxed load.
uint32_t capture_python_stack(format::PyFrameRef* frames, uintptr_t* codes, uint32_t max_frames);

// Fills a PyCode record for a code object returned by capture_python_stack on this thread, still
// executing (so alive). Strings point into the code object or into the given buffers.
void describe_python_code(uintptr_t code, uint64_t code_id, format::PyCodeRecord& out,
                          char* filename_buf, char* name_buf, size_t buf_size);

// Mixes the Python frames into a native stack's hash.
inline uint64_t hash_python_frames(uint64_t h, const format::PyFrameRef* frames, uint32_t n) {
  h ^= 0x5079737461636bull ^ n;  // "Pystack"
  for (uint32_t i = 0; i < n; ++i) {
    h ^= frames[i].code_id;
    h *= 0xff51afd7ed558ccdull;
    h ^= (frames[i].instr_offset << 1) | frames[i].flags;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 32;
  }
  return h ? h : 1;
}

}  // namespace gpumemshim::shim

// Reads CPython's interpreter frames of the calling thread.
//
// Safety: everything read is reachable from this thread's own PyThreadState (found through the
// public PyGILState_GetThisThreadState, which reads a TSS slot and needs no GIL). While this thread
// is inside a CUDA call its frames cannot change (the thread itself is the only one that pushes or
// pops them), and each frame holds a strong reference to its code object, whose filename, name and
// line table are immutable. Every pointer is null/alignment checked, objects are type checked
// against PyCode_Type / PyUnicode_Type / PyBytes_Type, frame owners must be in range, and the walk
// is capped. Layouts are only used for exactly recognised versions (Py_Version).
#include "python_stack.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>

#include "../interpose/next_symbol.h"
#include "../log.h"

namespace gpumemshim::shim {

namespace {

// Field offsets (bytes) of one CPython minor version, x86-64/aarch64 LP64, release builds.
struct Layout {
  uint8_t minor;
  uint32_t tstate_cframe;    // PyThreadState.cframe
  uint32_t cframe_current;   // _PyCFrame.current_frame
  uint32_t frame_code;       // _PyInterpreterFrame.f_code
  uint32_t frame_previous;   // _PyInterpreterFrame.previous
  uint32_t frame_prev_instr; // _PyInterpreterFrame.prev_instr
  int32_t frame_is_entry;    // _PyInterpreterFrame.is_entry (3.11), -1: none
  uint32_t frame_owner;      // _PyInterpreterFrame.owner
  uint8_t owner_max;         // highest valid _frameowner value
  int owner_cstack;          // FRAME_OWNED_BY_CSTACK, -1: none
  uint32_t code_firstlineno, code_filename, code_name, code_qualname, code_linetable;
  uint32_t code_firsttraceable, code_adaptive;  // _co_firsttraceable, co_code_adaptive
  uint32_t ascii_size;       // sizeof(PyASCIIObject): where compact ASCII data starts
  uint32_t compact_utf8_length, compact_utf8, compact_size;  // PyCompactUnicodeObject
};

// 3.11: measured with offsetof() against 3.11.7's internal/pycore_frame.h and cpython/*.h
// (tests/unit/python_layout_check.c).
constexpr Layout kPy311{11, 56, 8, 32, 48, 56, 68, 69, 2, -1,
                        72, 112, 120, 128, 136, 168, 184, 48, 48, 56, 72};
// 3.12: from CPython 3.12's Include/internal/pycore_frame.h, Include/cpython/pystate.h,
// Include/cpython/code.h and Include/cpython/unicodeobject.h (PyASCIIObject lost wstr, the
// interpreter frame starts with f_code/previous, owner 3 = FRAME_OWNED_BY_CSTACK marks the C entry
// frame each _PyEval_EvalFrameDefault pushes). Check with tests/unit/python_layout_check.c.
constexpr Layout kPy312{12, 56, 0, 0, 8, 56, -1, 70, 3, 3,
                        68, 112, 120, 128, 136, 176, 192, 40, 40, 48, 56};

constexpr uint32_t kObType = 8;      // PyObject.ob_type
constexpr uint32_t kObSize = 16;     // PyVarObject.ob_size
constexpr uint32_t kStrLength = 16;  // PyASCIIObject.length
constexpr uint32_t kStrState = 32;   // PyASCIIObject.state (bit field word)
constexpr uint32_t kBytesData = 32;  // PyBytesObject.ob_sval
constexpr uint8_t kOwnerGenerator = 1;
constexpr uint32_t kMaxWalk = 1024;  // frames visited, skipped ones included

enum State : int { kUnresolved, kReady, kOff };

struct Runtime {
  const Layout* layout = nullptr;
  void* (*get_tstate)() = nullptr;
  int (*is_initialized)() = nullptr;
  int (*is_finalizing)() = nullptr;
  uintptr_t code_type = 0, unicode_type = 0, bytes_type = 0;
};

std::atomic<int> g_state{kUnresolved};
Runtime g_rt;

template <typename T>
inline T load(uintptr_t base, uint32_t offset) {
  T v;
  std::memcpy(&v, reinterpret_cast<const void*>(base + offset), sizeof v);
  return v;
}

inline bool aligned_ptr(uintptr_t p) { return p != 0 && (p & 7) == 0; }

void* find(const char* name) { return real_symbol(RTLD_DEFAULT, name); }

// Once per process (racing threads compute the same answer).
int resolve() {
  Runtime rt;
  rt.get_tstate = reinterpret_cast<void* (*)()>(find("PyGILState_GetThisThreadState"));
  if (!rt.get_tstate) return kOff;  // not a Python process
  const auto* version = static_cast<const unsigned long*>(find("Py_Version"));
  unsigned long v = version ? *version : 0;
  unsigned major = (v >> 24) & 0xff, minor = (v >> 16) & 0xff, micro = (v >> 8) & 0xff;
  unsigned level = (v >> 4) & 0xf;  // 0xA alpha, 0xB beta, 0xC candidate, 0xF final
  if (major == 3 && minor == 11 && level >= 0xC) rt.layout = &kPy311;
  if (major == 3 && minor == 12 && level >= 0xC) rt.layout = &kPy312;
  rt.is_initialized = reinterpret_cast<int (*)()>(find("Py_IsInitialized"));
  rt.is_finalizing = reinterpret_cast<int (*)()>(find("_Py_IsFinalizing"));
  rt.code_type = reinterpret_cast<uintptr_t>(find("PyCode_Type"));
  rt.unicode_type = reinterpret_cast<uintptr_t>(find("PyUnicode_Type"));
  rt.bytes_type = reinterpret_cast<uintptr_t>(find("PyBytes_Type"));
  if (!rt.layout || !rt.is_initialized || !rt.code_type || !rt.unicode_type || !rt.bytes_type) {
    if (v)
      log_info("Python %u.%u.%u (release level %x) is not supported for Python stacks (3.11 and "
               "3.12 are); recording native stacks only", major, minor, micro, level);
    else
      log_info("this Python is older than 3.11 (no Py_Version): Python stacks are not supported; "
               "recording native stacks only");
    return kOff;
  }
  g_rt = rt;
  log_debug("Python 3.%u.%u: recording Python stacks", minor, micro);
  return kReady;
}

// A str object's text if it is compact and ASCII, cached UTF-8, or Latin-1 (converted into buf).
std::string_view read_str(const Layout& L, uintptr_t obj, char* buf, size_t buf_size) {
  if (!aligned_ptr(obj) || load<uintptr_t>(obj, kObType) != g_rt.unicode_type) return "?";
  uint32_t state = load<uint32_t>(obj, kStrState);
  bool compact = state & 0x20, ascii = state & 0x40;
  unsigned kind = (state >> 2) & 7;
  auto length = load<int64_t>(obj, kStrLength);
  if (!compact || length < 0 || length > (1 << 20)) return "?";
  if (ascii) return {reinterpret_cast<const char*>(obj + L.ascii_size), static_cast<size_t>(length)};
  uintptr_t utf8 = load<uintptr_t>(obj, L.compact_utf8);
  auto utf8_length = load<int64_t>(obj, L.compact_utf8_length);
  if (utf8 && utf8_length >= 0 && utf8_length <= (1 << 20))
    return {reinterpret_cast<const char*>(utf8), static_cast<size_t>(utf8_length)};
  if (kind != 1) return "?";
  const auto* latin1 = reinterpret_cast<const uint8_t*>(obj + L.compact_size);
  size_t n = 0;
  for (int64_t i = 0; i < length; ++i) {
    uint8_t c = latin1[i];
    if (n + 2 > buf_size) return "?";
    if (c < 0x80) {
      buf[n++] = static_cast<char>(c);
    } else {
      buf[n++] = static_cast<char>(0xc0 | (c >> 6));
      buf[n++] = static_cast<char>(0x80 | (c & 0x3f));
    }
  }
  return {buf, n};
}

inline uint64_t code_id_of(const Layout& L, uintptr_t code) {
  uint64_t h = code * 0x9e3779b97f4a7c15ull;
  for (uint32_t off : {L.code_filename, L.code_qualname, L.code_linetable}) {
    h ^= load<uintptr_t>(code, off);
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 29;
  }
  h ^= static_cast<uint64_t>(load<int32_t>(code, L.code_firstlineno));
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 32;
  return h ? h : 1;
}

}  // namespace

uint32_t capture_python_stack(format::PyFrameRef* frames, uintptr_t* codes, uint32_t max_frames) {
  int state = g_state.load(std::memory_order_acquire);
  if (state == kOff) [[likely]] return 0;
  if (state == kUnresolved) {
    state = resolve();
    g_state.store(state, std::memory_order_release);
    if (state != kReady) return 0;
  }
  if (!g_rt.is_initialized() || (g_rt.is_finalizing && g_rt.is_finalizing())) return 0;
  const Layout& L = *g_rt.layout;
  auto tstate = reinterpret_cast<uintptr_t>(g_rt.get_tstate());
  if (!aligned_ptr(tstate)) return 0;
  uintptr_t cframe = load<uintptr_t>(tstate, L.tstate_cframe);
  if (!aligned_ptr(cframe)) return 0;
  uintptr_t frame = load<uintptr_t>(cframe, L.cframe_current);
  uint32_t n = 0;
  for (uint32_t steps = 0; aligned_ptr(frame) && n < max_frames && steps < kMaxWalk; ++steps) {
    uint8_t owner = load<uint8_t>(frame, L.frame_owner);
    if (owner > L.owner_max) break;  // not a frame of a layout we know: stop, keep what we have
    uintptr_t previous = load<uintptr_t>(frame, L.frame_previous);
    if (owner == L.owner_cstack) {  // 3.12: the C entry frame below one eval loop invocation
      if (n > 0) frames[n - 1].flags |= format::kPyFrameEntry;
      frame = previous;
      continue;
    }
    uintptr_t code = load<uintptr_t>(frame, L.frame_code);
    if (!aligned_ptr(code) || load<uintptr_t>(code, kObType) != g_rt.code_type) break;
    bool entry = L.frame_is_entry >= 0 && load<uint8_t>(frame, static_cast<uint32_t>(L.frame_is_entry));
    auto units = load<int64_t>(code, kObSize);
    auto first_traceable = load<int32_t>(code, L.code_firsttraceable);
    uintptr_t instr = load<uintptr_t>(frame, L.frame_prev_instr);
    auto offset = (static_cast<int64_t>(instr) - static_cast<int64_t>(code + L.code_adaptive)) / 2;
    bool incomplete = owner != kOwnerGenerator && offset < first_traceable;
    // An incomplete frame (not yet at its first RESUME) has no meaningful line; keep it only when
    // it alone stands for an eval loop invocation, so the analyzer's matching stays aligned.
    if (!incomplete || entry) {
      if (offset < 0 || offset >= units) offset = 0;
      frames[n] = format::PyFrameRef{code_id_of(L, code), static_cast<uint64_t>(offset),
                                     static_cast<uint8_t>(entry ? format::kPyFrameEntry : 0)};
      codes[n] = code;
      ++n;
    }
    frame = previous;
  }
  return n;
}

void describe_python_code(uintptr_t code, uint64_t code_id, format::PyCodeRecord& out,
                          char* filename_buf, char* name_buf, size_t buf_size) {
  const Layout& L = *g_rt.layout;
  out.code_id = code_id;
  auto first_line = load<int32_t>(code, L.code_firstlineno);
  out.first_line = first_line > 0 ? static_cast<uint64_t>(first_line) : 0;
  out.filename = read_str(L, load<uintptr_t>(code, L.code_filename), filename_buf, buf_size);
  out.name = read_str(L, load<uintptr_t>(code, L.code_qualname), name_buf, buf_size);
  if (out.name == "?") out.name = read_str(L, load<uintptr_t>(code, L.code_name), name_buf, buf_size);
  out.line_table = {};
  uintptr_t table = load<uintptr_t>(code, L.code_linetable);
  if (aligned_ptr(table) && load<uintptr_t>(table, kObType) == g_rt.bytes_type) {
    auto size = load<int64_t>(table, kObSize);
    if (size > 0 && size <= (1 << 20))
      out.line_table = {reinterpret_cast<const char*>(table + kBytesData), static_cast<size_t>(size)};
  }
  out.python_minor = L.minor;
}

}  // namespace gpumemshim::shim

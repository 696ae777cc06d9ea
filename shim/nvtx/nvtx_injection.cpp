// NVTX v3 injection: see nvtx_injection.h. The callbacks run inside the host program's NVTX calls:
// they never allocate, never throw, and cost one record_marker each.
#include "nvtx_injection.h"

#include "../api/marker_name.h"
#include "../api/step_source.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cstddef>
#include <cstring>
#include <cwchar>

#include "../interpose/next_symbol.h"
#include "../log.h"
#include "../record/recorder.h"

#if defined(GPUMEMSHIM_HAVE_NVTX)
// Types, callback ids and export-table layout only: NVTX_NO_IMPL leaves out NVTX's own
// implementation (that lives in the host program).
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#endif

namespace gpumemshim::shim {

bool nvtx_injection_built() {
#if defined(GPUMEMSHIM_HAVE_NVTX)
  return true;
#else
  return false;
#endif
}

}  // namespace gpumemshim::shim

#if !defined(GPUMEMSHIM_HAVE_NVTX)

// Built without the NVTX headers: the environment is never pointed at the shim, and a tool that
// points NVTX here anyway is declined (NVTX then makes every call a no-op).
extern "C" int InitializeInjectionNvtx2(const void* (*)(uint32_t)) { return 0; }

#else

namespace gpumemshim::shim {
namespace {

using format::MarkerKind;

constexpr size_t kMaxName = kMaxMarkerName;

// Nesting depth of push/pop ranges on this thread: what nvtxRangePush/Pop return.
__attribute__((tls_model("initial-exec"))) thread_local int t_depth = 0;
// The depth of this thread's open range named like a step (-1: none): its pop ends a step.
__attribute__((tls_model("initial-exec"))) thread_local int t_step_depth = -1;
__attribute__((tls_model("initial-exec"))) thread_local char t_step_name[64];

// Wide names: ASCII characters kept, every other one becomes '?'.
const char* wide_name(const wchar_t* s, char* buf) {
  if (!s) return "";
  size_t i = 0;
  for (; i < kMaxName && s[i] != L'\0'; ++i)
    buf[i] = (s[i] > 0 && s[i] < 0x80) ? static_cast<char>(s[i]) : '?';
  buf[i] = '\0';
  return buf;
}

const char* attrib_name(const nvtxEventAttributes_t* a, char* buf) {
  if (!a) return "";
  // Older callers may pass a smaller struct: the message must lie inside what they gave.
  constexpr size_t kMessageEnd = offsetof(nvtxEventAttributes_t, message) + sizeof(a->message);
  if (a->size < kMessageEnd) return "";
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return cut_marker_name(a->message.ascii, buf);
    case NVTX_MESSAGE_TYPE_UNICODE: return wide_name(a->message.unicode, buf);
    default: return "";  // registered strings belong to domains, which are not attached
  }
}

void mark(const char* name) {
  record_marker(MarkerKind::kMark, name);
  if (is_step_name(name)) record_step(StepSource::kNvtx, name);
}

int push(const char* name) {
  record_marker(MarkerKind::kRangePush, name);
  if (t_step_depth < 0 && is_step_name(name)) {
    t_step_depth = t_depth;
    size_t n = strnlen(name, sizeof t_step_name - 1);
    std::memcpy(t_step_name, name, n);
    t_step_name[n] = '\0';
  }
  return t_depth++;
}

void cb_mark_a(const char* message) {
  char buf[kMaxName + 1];
  mark(cut_marker_name(message, buf));
}
void cb_mark_w(const wchar_t* message) {
  char buf[kMaxName + 1];
  mark(wide_name(message, buf));
}
void cb_mark_ex(const nvtxEventAttributes_t* attrib) {
  char buf[kMaxName + 1];
  mark(attrib_name(attrib, buf));
}
int cb_push_a(const char* message) {
  char buf[kMaxName + 1];
  return push(cut_marker_name(message, buf));
}
int cb_push_w(const wchar_t* message) {
  char buf[kMaxName + 1];
  return push(wide_name(message, buf));
}
int cb_push_ex(const nvtxEventAttributes_t* attrib) {
  char buf[kMaxName + 1];
  return push(attrib_name(attrib, buf));
}
int cb_pop() {
  // An unbalanced pop is recorded as the program made it; NVTX's convention is a negative result.
  record_marker(MarkerKind::kRangePop, "");
  if (t_depth == 0) return -1;
  if (--t_depth == t_step_depth) {
    t_step_depth = -1;
    record_step(StepSource::kNvtx, t_step_name);
  }
  return t_depth;
}

// The shim's own path, for NVTX_INJECTION64_PATH (absolute: the program may chdir before its
// first NVTX call).
char g_self_path[PATH_MAX];

bool find_self_path() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&find_self_path), &info) || !info.dli_fname ||
      !*info.dli_fname)
    return false;
  if (realpath(info.dli_fname, g_self_path)) return true;
  size_t n = strnlen(info.dli_fname, sizeof g_self_path);
  if (n == sizeof g_self_path) return false;
  std::memcpy(g_self_path, info.dli_fname, n + 1);
  return true;
}

__attribute__((constructor)) void nvtx_injection_constructor() {
  if (recording_off()) return;  // GPUMEMSHIM_DISABLE=1 (also reads GPUMEMSHIM_LOG for log_info)
  if (!find_self_path()) {
    log_info("cannot find the shim's own path; NVTX ranges are not recorded");
    return;
  }
  const char* current = getenv("NVTX_INJECTION64_PATH");
  if (!current || !*current) {
    setenv("NVTX_INJECTION64_PATH", g_self_path, 1);
    return;
  }
  // Inherited from a parent process under the shim: already ours.
  char resolved[PATH_MAX];
  if (!std::strcmp(current, g_self_path) ||
      (realpath(current, resolved) && !std::strcmp(resolved, g_self_path)))
    return;
  log_info("NVTX_INJECTION64_PATH is set to %s (another tool); NVTX ranges are not recorded",
           current);
}

// True when the shim is in the global symbol scope (preloaded), i.e. its hooks are live. A
// process that inherited NVTX_INJECTION64_PATH but not LD_PRELOAD loads the shim privately through
// NVTX: it is declined there, so it never starts a trace of its own. The main program's handle
// searches the global scope (RTLD_DEFAULT would search the caller's, which includes the shim).
bool preloaded() {
  void* main_program = dlopen(nullptr, RTLD_LAZY);
  if (!main_program) return false;
  void* global = real_symbol(main_program, "InitializeInjectionNvtx2");
  dlclose(main_program);
  return global == reinterpret_cast<void*>(&InitializeInjectionNvtx2);
}

template <typename Fn>
bool attach(NvtxFunctionTable table, unsigned int size, unsigned int id, Fn fn) {
  if (id >= size || !table[id]) return false;  // size: the module's CBID_..._SIZE
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
  return true;
}

}  // namespace
}  // namespace gpumemshim::shim

extern "C" int InitializeInjectionNvtx2(const void* (*get_export_table)(uint32_t)) {
  using namespace gpumemshim::shim;
  if (!get_export_table || recording_off()) return 0;
  if (!preloaded()) {
    log_debug("NVTX: the shim is not preloaded in this process; NVTX ranges are not recorded");
    return 0;
  }
  auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
      !callbacks->GetModuleFunctionTable)
    return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || !table) return 0;
  // Push and pop are attached together or not at all, so ranges stay balanced.
  if (!attach(table, size, NVTX_CBID_CORE_RangePop, &cb_pop)) return 0;
  attach(table, size, NVTX_CBID_CORE_RangePushA, &cb_push_a);
  attach(table, size, NVTX_CBID_CORE_RangePushW, &cb_push_w);
  attach(table, size, NVTX_CBID_CORE_RangePushEx, &cb_push_ex);
  attach(table, size, NVTX_CBID_CORE_MarkA, &cb_mark_a);
  attach(table, size, NVTX_CBID_CORE_MarkW, &cb_mark_w);
  attach(table, size, NVTX_CBID_CORE_MarkEx, &cb_mark_ex);
  log_debug("NVTX attached: marks and push/pop ranges are recorded");
  return 1;
}

#endif  // GPUMEMSHIM_HAVE_NVTX

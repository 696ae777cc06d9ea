/* Step markers for C and C++ programs recorded by gpumemshim (`gpumemshim record -- ./train`).
 *
 * Header only, nothing to link but libdl: each call finds the shim's C API (shim/api/marker_api.h)
 * among the process's symbols with dlsym. Without the shim every call does nothing, so a program
 * may mark its steps unconditionally and runs unchanged when not recorded. With CMake:
 *
 *     find_package(gpumemshim REQUIRED)
 *     target_link_libraries(train PRIVATE gpumemshim::markers)
 *
 * C++:  gpumemshim::step();  gpumemshim::mark("eval");  { gpumemshim::ExpectNoLeak r("eval"); ... }
 * C:    gpumemshim_marker_step(NULL);  gpumemshim_marker_mark("eval");
 *
 * C++ looks each function up once; C looks it up on every call (about a microsecond), which is
 * fine for step boundaries but not for per-allocation use.
 */
#ifndef GPUMEMSHIM_MARKERS_H
#define GPUMEMSHIM_MARKERS_H

#include <dlfcn.h>

#ifdef RTLD_DEFAULT
#define GPUMEMSHIM_MARKERS_SCOPE RTLD_DEFAULT
#else
#define GPUMEMSHIM_MARKERS_SCOPE ((void*)0) /* glibc's RTLD_DEFAULT without _GNU_SOURCE */
#endif

#ifdef __cplusplus
namespace gpumemshim {
namespace markers_detail {

using NameFn = void (*)(const char*);
using ActiveFn = int (*)();

template <typename Fn>
inline Fn lookup(const char* symbol) {
  return reinterpret_cast<Fn>(dlsym(GPUMEMSHIM_MARKERS_SCOPE, symbol));
}

// The shim is preloaded before main, so the first answer holds for the whole run.
inline NameFn step_fn() {
  static const NameFn fn = lookup<NameFn>("gpumemshim_step");
  return fn;
}
inline NameFn mark_fn() {
  static const NameFn fn = lookup<NameFn>("gpumemshim_mark");
  return fn;
}
inline NameFn region_begin_fn() {
  static const NameFn fn = lookup<NameFn>("gpumemshim_region_begin");
  return fn;
}
inline NameFn region_end_fn() {
  static const NameFn fn = lookup<NameFn>("gpumemshim_region_end");
  return fn;
}
inline ActiveFn active_fn() {
  static const ActiveFn fn = lookup<ActiveFn>("gpumemshim_active");
  return fn;
}

}  // namespace markers_detail

// True while the shim is loaded and recording.
inline bool active() {
  auto fn = markers_detail::active_fn();
  return fn && fn() == 1;
}

// A training-step boundary: call it once per step (e.g. after the optimizer's step).
inline void step(const char* name = nullptr) {
  if (auto fn = markers_detail::step_fn()) fn(name);
}

// A named point event.
inline void mark(const char* name) {
  if (auto fn = markers_detail::mark_fn()) fn(name);
}

// Memory allocated while it lives and still alive at its end is reported as a leak.
class ExpectNoLeak {
 public:
  explicit ExpectNoLeak(const char* name = nullptr) : name_(name) {
    if (auto fn = markers_detail::region_begin_fn()) fn(name_);
  }
  ~ExpectNoLeak() {
    if (auto fn = markers_detail::region_end_fn()) fn(name_);
  }
  ExpectNoLeak(const ExpectNoLeak&) = delete;
  ExpectNoLeak& operator=(const ExpectNoLeak&) = delete;

 private:
  const char* name_;
};

}  // namespace gpumemshim

#else /* C */

static inline void gpumemshim_marker_call_(const char* symbol, const char* name) {
  void (*fn)(const char*);
  *(void**)(&fn) = dlsym(GPUMEMSHIM_MARKERS_SCOPE, symbol); /* POSIX's way to a function */
  if (fn) fn(name);
}

static inline int gpumemshim_marker_active(void) {
  int (*fn)(void);
  *(void**)(&fn) = dlsym(GPUMEMSHIM_MARKERS_SCOPE, "gpumemshim_active");
  return fn ? fn() == 1 : 0;
}
static inline void gpumemshim_marker_step(const char* name) {
  gpumemshim_marker_call_("gpumemshim_step", name);
}
static inline void gpumemshim_marker_mark(const char* name) {
  gpumemshim_marker_call_("gpumemshim_mark", name);
}
static inline void gpumemshim_marker_region_begin(const char* name) {
  gpumemshim_marker_call_("gpumemshim_region_begin", name);
}
static inline void gpumemshim_marker_region_end(const char* name) {
  gpumemshim_marker_call_("gpumemshim_region_end", name);
}

#endif

#endif /* GPUMEMSHIM_MARKERS_H */

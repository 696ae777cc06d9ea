// exec replaces the image without running exit handlers: pending records and the End block are
// written first. The new image inherits LD_PRELOAD and starts a trace of its own (same pid, so a
// ".N" suffix). An exec that fails returns, and the process and its trace go on.
// glibc's exec* wrappers call execve internally, not through the PLT, so each is interposed.
#include <unistd.h>

#include <cstdarg>

#include "../record/recorder.h"
#include "next_symbol.h"

#define GPUMEMSHIM_EXPORT extern "C" __attribute__((visibility("default")))

using namespace gpumemshim::shim;

namespace {
RealFunction<int (*)(const char*, char* const[], char* const[])> real_execve("execve");
RealFunction<int (*)(const char*, char* const[])> real_execv("execv");
RealFunction<int (*)(const char*, char* const[])> real_execvp("execvp");
RealFunction<int (*)(const char*, char* const[], char* const[])> real_execvpe("execvpe");

constexpr int kMaxListArgs = 4096;

// Collects a NULL-terminated variadic argument list (execl and friends) into argv.
int collect_args(const char* first, va_list ap, const char** argv) {
  int n = 0;
  argv[n++] = first;
  while (argv[n - 1] && n < kMaxListArgs) argv[n++] = va_arg(ap, const char*);
  return argv[n - 1] ? -1 : n;
}

template <typename Exec>
int ending_trace(Exec exec) {
  const bool ended = end_trace_before_exec();
  const int r = exec();
  if (ended) resume_trace_after_failed_exec();
  return r;
}
}  // namespace

GPUMEMSHIM_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  return ending_trace([&] { return real_execve.get()(path, argv, envp); });
}

GPUMEMSHIM_EXPORT int execv(const char* path, char* const argv[]) {
  return ending_trace([&] { return real_execv.get()(path, argv); });
}

GPUMEMSHIM_EXPORT int execvp(const char* file, char* const argv[]) {
  return ending_trace([&] { return real_execvp.get()(file, argv); });
}

GPUMEMSHIM_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return ending_trace([&] { return real_execvpe.get()(file, argv, envp); });
}

GPUMEMSHIM_EXPORT int execl(const char* path, const char* arg, ...) {
  const char* argv[kMaxListArgs];
  va_list ap;
  va_start(ap, arg);
  int n = collect_args(arg, ap, argv);
  va_end(ap);
  if (n < 0) return -1;
  return execv(path, const_cast<char* const*>(argv));
}

GPUMEMSHIM_EXPORT int execlp(const char* file, const char* arg, ...) {
  const char* argv[kMaxListArgs];
  va_list ap;
  va_start(ap, arg);
  int n = collect_args(arg, ap, argv);
  va_end(ap);
  if (n < 0) return -1;
  return execvp(file, const_cast<char* const*>(argv));
}

GPUMEMSHIM_EXPORT int execle(const char* path, const char* arg, ...) {
  const char* argv[kMaxListArgs];
  va_list ap;
  va_start(ap, arg);
  int n = collect_args(arg, ap, argv);
  char* const* envp = va_arg(ap, char* const*);
  va_end(ap);
  if (n < 0) return -1;
  return execve(path, const_cast<char* const*>(argv), envp);
}

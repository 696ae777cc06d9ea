// Preloaded ahead of the shim: every writev(2) to a file waits SLOW_WRITES_MS (default 30) first,
// as on a slow or busy disk, where the shim's flusher spends each flush waiting for its write.
#include <dlfcn.h>
#include <sys/uio.h>
#include <time.h>

#include <cstdlib>

extern "C" ssize_t writev(int fd, const iovec* iov, int count) {
  using Writev = ssize_t (*)(int, const iovec*, int);
  static const Writev real = reinterpret_cast<Writev>(dlsym(RTLD_NEXT, "writev"));
  static const long ms = [] {
    const char* e = std::getenv("SLOW_WRITES_MS");
    return e ? std::atol(e) : 30L;
  }();
  if (fd > 2) {
    timespec delay{ms / 1000, (ms % 1000) * 1'000'000};
    nanosleep(&delay, nullptr);
  }
  return real(fd, iov, count);
}

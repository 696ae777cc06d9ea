#include "python_path.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

#include "../log.h"

namespace gpumemshim::shim {
namespace {

constexpr char kBootDir[] = "gpumemshim-python";  // beside libgpumemshim.so (build and install)
constexpr size_t kMaxPath = 4096;

bool is_file(const char* path) {
  struct stat st;
  return ::stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

// True when `list` (a ':'-separated PYTHONPATH) already starts with `dir`.
bool starts_with_entry(const char* list, const char* dir) {
  size_t n = std::strlen(dir);
  return std::strncmp(list, dir, n) == 0 && (list[n] == ':' || list[n] == '\0');
}

}  // namespace

void add_python_boot_path() {
  if (const char* v = std::getenv("GPUMEMSHIM_PYTHON_BOOT"); v && std::strcmp(v, "0") == 0) return;
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&add_python_boot_path), &info) || !info.dli_fname) return;
  const char* slash = std::strrchr(info.dli_fname, '/');
  if (!slash) return;
  size_t dir_len = static_cast<size_t>(slash - info.dli_fname);
  char dir[kMaxPath];
  char probe[kMaxPath];
  if (dir_len + sizeof kBootDir + 1 >= sizeof dir) return;
  std::memcpy(dir, info.dli_fname, dir_len);
  dir[dir_len] = '/';
  std::memcpy(dir + dir_len + 1, kBootDir, sizeof kBootDir);  // with its NUL
  if (std::strlen(dir) + sizeof "/sitecustomize.py" > sizeof probe) return;
  std::strcpy(probe, dir);
  std::strcat(probe, "/sitecustomize.py");
  if (!is_file(probe)) return;

  const char* old = std::getenv("PYTHONPATH");
  if (old && starts_with_entry(old, dir)) return;
  char value[2 * kMaxPath];
  size_t dn = std::strlen(dir);
  size_t on = old ? std::strlen(old) : 0;
  if (dn + 1 + on + 1 > sizeof value) {
    log_warn("PYTHONPATH is too long to add the Python boot directory: no automatic torch bridge");
    return;
  }
  std::memcpy(value, dir, dn);
  size_t at = dn;
  if (on) {
    value[at++] = ':';
    std::memcpy(value + at, old, on);
    at += on;
  }
  value[at] = '\0';
  ::setenv("PYTHONPATH", value, 1);
}

}  // namespace gpumemshim::shim

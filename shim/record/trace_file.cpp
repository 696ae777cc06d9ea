#include "trace_file.h"

#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../log.h"
#include "clock.h"
#include "gpumemshim/format/encoder.h"

namespace gpumemshim::shim {

namespace fmtrec = gpumemshim::format;

namespace {

const char* rank_from_env() {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"}) {
    const char* v = std::getenv(name);
    if (v && *v) return v;
  }
  return nullptr;
}

bool append(char* out, size_t cap, size_t& len, const char* s) {
  size_t n = std::strlen(s);
  if (len + n + 1 > cap) return false;
  std::memcpy(out + len, s, n);
  len += n;
  out[len] = 0;
  return true;
}

// Reads a small /proc file into buf; returns the bytes read.
size_t read_small_file(const char* path, char* buf, size_t cap) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t len = 0;
  while (len < cap) {
    ssize_t r = ::read(fd, buf + len, cap - len);
    if (r <= 0) break;
    len += static_cast<size_t>(r);
  }
  ::close(fd);
  return len;
}

}  // namespace

bool expand_output_pattern(const char* pattern, char* out, size_t cap) {
  size_t len = 0;
  out[0] = 0;
  char tmp[256];
  for (const char* p = pattern; *p; ++p) {
    if (*p != '%' || !p[1]) {
      char c[2] = {*p, 0};
      if (!append(out, cap, len, c)) return false;
      continue;
    }
    ++p;
    switch (*p) {
      case 'p': std::snprintf(tmp, sizeof tmp, "%d", static_cast<int>(getpid())); break;
      case 'h':
        if (gethostname(tmp, sizeof tmp) != 0) std::strcpy(tmp, "unknown");
        tmp[sizeof tmp - 1] = 0;
        break;
      case 'r': {
        const char* r = rank_from_env();
        std::snprintf(tmp, sizeof tmp, "%s", r ? r : "0");
        break;
      }
      case 't': std::snprintf(tmp, sizeof tmp, "%llu",
                              static_cast<unsigned long long>(realtime_ns() / 1000000000ull)); break;
      case '%': std::strcpy(tmp, "%"); break;
      default: std::snprintf(tmp, sizeof tmp, "%%%c", *p); break;
    }
    if (!append(out, cap, len, tmp)) return false;
  }
  return true;
}

bool TraceFile::open(const char* pattern, uint64_t start_mono_ns) {
  char base[1024];
  if (!expand_output_pattern(pattern, base, sizeof base)) {
    log_warn("output path from pattern '%s' is too long; recording disabled", pattern);
    return false;
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (attempt == 0) std::snprintf(path_, sizeof path_, "%s", base);
    else std::snprintf(path_, sizeof path_, "%s.%d", base, attempt);
    fd_ = ::open(path_, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ >= 0 || errno != EEXIST) break;
  }
  if (fd_ < 0) {
    log_warn("cannot write trace %s: %s; recording disabled", path_, std::strerror(errno));
    return false;
  }
  uint8_t header[fmtrec::kHeaderSize];
  write_direct(header, fmtrec::encode_header(header, sizeof header, fmtrec::kVersion2_0));
  write_process_record(start_mono_ns);
  write_new_modules();
  log_info("recording to %s", path_);
  return true;
}

void TraceFile::write_direct(const uint8_t* bytes, size_t n) const {
  if (fd_ < 0 || n == 0) return;
  for (;;) {
    ssize_t w = ::write(fd_, bytes, n);
    if (w < 0 && errno == EINTR) continue;
    return;
  }
}

void TraceFile::write_process_record(uint64_t start_mono_ns) {
  static char cmdline[4096];
  size_t n = read_small_file("/proc/self/cmdline", cmdline, sizeof cmdline - 1);
  for (size_t i = 0; i + 1 < n; ++i)
    if (cmdline[i] == 0) cmdline[i] = ' ';
  while (n > 0 && cmdline[n - 1] == 0) --n;
  static char exe[1024];
  ssize_t e = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[e > 0 ? e : 0] = 0;
  char host[256];
  if (gethostname(host, sizeof host) != 0) std::strcpy(host, "unknown");
  host[sizeof host - 1] = 0;
  const char* rank = rank_from_env();

  fmtrec::ProcessRecord r;
  r.pid = static_cast<uint64_t>(getpid());
  r.ppid = static_cast<uint64_t>(getppid());
  r.rank = rank ? std::strtoll(rank, nullptr, 10) : -1;
  r.start_wall_ns = realtime_ns() - (monotonic_ns() - start_mono_ns);
  r.start_mono_ns = start_mono_ns;
  r.host = host;
  r.command_line = std::string_view(cmdline, n);
  r.executable = exe;
  static uint8_t buf[8192];
  write_direct(buf, fmtrec::encode(buf, sizeof buf, r));

  fmtrec::AttributeRecord attr{"shim.version", GPUMEMSHIM_VERSION};
  write_direct(buf, fmtrec::encode(buf, sizeof buf, attr));
}

namespace {

struct ModuleScan {
  const TraceFile* file;
  unsigned long long adds;
  bool first_object;
};

// Reads the GNU build-id note from the object's PT_NOTE segments, in memory.
std::string_view find_build_id(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    auto* p = reinterpret_cast<const uint8_t*>(info->dlpi_addr + ph.p_vaddr);
    const uint8_t* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      auto* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const uint8_t* name = p + sizeof(ElfW(Nhdr));
      const uint8_t* desc = name + ((n->n_namesz + 3) & ~3u);
      if (desc + n->n_descsz > end) break;
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0)
        return {reinterpret_cast<const char*>(desc), n->n_descsz};
      p = desc + ((n->n_descsz + 3) & ~3u);
    }
  }
  return {};
}

int emit_module(dl_phdr_info* info, size_t, void* data) {
  auto* scan = static_cast<ModuleScan*>(data);
  bool main_program = scan->first_object;
  scan->first_object = false;
  uint64_t lo = ~0ull, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    if (ph.p_vaddr < lo) lo = ph.p_vaddr;
    if (ph.p_vaddr + ph.p_memsz > hi) hi = ph.p_vaddr + ph.p_memsz;
  }
  if (hi <= lo) return 0;
  static char exe[1024];
  const char* path = info->dlpi_name;
  if (main_program && (!path || !*path)) {
    ssize_t e = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[e > 0 ? e : 0] = 0;
    path = exe;
  }
  if (!path || !*path) return 0;  // the vDSO: nothing on disk to symbolize
  fmtrec::ModuleRecord r;
  r.load_bias = info->dlpi_addr;
  r.start = info->dlpi_addr + lo;
  r.size = hi - lo;
  r.build_id = find_build_id(info);
  r.path = path;
  uint8_t buf[2048];
  scan->file->write_direct(buf, fmtrec::encode(buf, sizeof buf, r));
  return 0;
}

int read_adds(dl_phdr_info* info, size_t size, void* data) {
  if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
    *static_cast<unsigned long long*>(data) = info->dlpi_adds;
  return 1;  // one object is enough: the counters are global
}

}  // namespace

// Re-emits the whole map when objects were added: the analyzer keeps the latest record for each
// address range, and dlopen is rare enough that the duplicates cost nothing.
void TraceFile::write_new_modules() {
  if (fd_ < 0) return;
  unsigned long long adds = 0;
  dl_iterate_phdr(read_adds, &adds);
  if (adds == modules_seen_adds_ && adds != 0) return;
  modules_seen_adds_ = adds;
  ModuleScan scan{this, adds, true};
  dl_iterate_phdr(emit_module, &scan);
}

void TraceFile::forget_after_fork() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  modules_seen_adds_ = 0;
}

void TraceFile::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace gpumemshim::shim

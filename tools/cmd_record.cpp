// `gpumemshim record [-o PATTERN] [--stacks S] -- CMD ARGS...`: run CMD with the shim preloaded.
#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli.h"

namespace gpumemshim::cli {

namespace {

constexpr const char* kDefaultPattern = "gpumemshim.%h.%p.trace";

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The trace pattern's directory and a glob for its file name (%p %h %r %t → *, %% → %).
std::pair<std::string, std::string> pattern_glob(const std::string& pattern) {
  std::string dir = ".", name = pattern;
  if (auto slash = pattern.rfind('/'); slash != std::string::npos) {
    dir = slash == 0 ? "/" : pattern.substr(0, slash);
    name = pattern.substr(slash + 1);
  }
  std::string glob;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '%' && i + 1 < name.size()) {
      char c = name[++i];
      glob += c == '%' ? "%" : "*";
    } else if (name[i] == '*' || name[i] == '?' || name[i] == '[' || name[i] == '\\') {
      glob += '\\';
      glob += name[i];
    } else {
      glob += name[i];
    }
  }
  return {dir, glob + "*"};  // the shim may add a suffix (e.g. after fork)
}

struct FileStamp {
  int64_t mtime_ns;
  int64_t size;
  bool operator==(const FileStamp&) const = default;
};

std::map<std::string, FileStamp> snapshot(const std::string& dir, const std::string& glob) {
  std::map<std::string, FileStamp> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (::fnmatch(glob.c_str(), e->d_name, 0) != 0) continue;
    std::string p = dir == "." ? std::string(e->d_name)
                    : dir == "/" ? "/" + std::string(e->d_name) : dir + "/" + e->d_name;
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out[p] = FileStamp{static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                       static_cast<int64_t>(st.st_size)};
  }
  ::closedir(d);
  return out;
}

std::string executable_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string exe(buf, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/'));
}

}  // namespace

std::optional<std::string> locate_shim(std::string* why) {
  if (const char* env = std::getenv("GPUMEMSHIM_LIBRARY"); env && *env) {
    if (is_file(env)) return std::string(env);
    if (why) *why = fmt::format("GPUMEMSHIM_LIBRARY={}: no such file", env);
    return std::nullopt;
  }
  std::string dir = executable_dir();
  if (dir.empty()) {
    if (why) *why = "cannot find the shim: /proc/self/exe is unreadable (set GPUMEMSHIM_LIBRARY)";
    return std::nullopt;
  }
  // The install's own layout first (bin and lib as CMake installed them, also inside the Python
  // package), then the build tree's and the common ones.
  std::vector<std::string> candidates{"/" GPUMEMSHIM_BIN_TO_LIB "/libgpumemshim.so",
                                      "/../lib/libgpumemshim.so",
                                      "/../lib/gpumemshim/libgpumemshim.so"};
  std::string looked;
  for (const std::string& rel : candidates) {
    std::string p = dir + rel;
    if (is_file(p)) {
      char real[4096];
      return ::realpath(p.c_str(), real) ? std::string(real) : p;
    }
    std::string in = p.substr(0, p.rfind('/'));
    if (looked.find(in) == std::string::npos) looked += (looked.empty() ? "" : ", ") + in;
  }
  if (why)
    *why = fmt::format(
        "cannot find libgpumemshim.so next to {}/gpumemshim (looked in {}; set "
        "GPUMEMSHIM_LIBRARY)",
        dir, looked);
  return std::nullopt;
}

std::string find_shim() {
  std::string why;
  if (auto shim = locate_shim(&why)) return *shim;
  throw CliError(why);
}

int run_record(const RecordOptions& o) {
  if (o.command.empty()) throw CliError("record: no command given (usage: gpumemshim record -- CMD ARGS...)");
  std::string shim = find_shim();
  // The shim goes after what is already preloaded: sanitizer runtimes must stay first, and a
  // tool the user preloaded on purpose keeps its place.
  std::string preload = shim;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload = std::string(old) + ":" + shim;
  // The torch bridge, when built next to the shim: python/gpumemshim attach_torch() loads it.
  std::string bridge = shim.substr(0, shim.rfind('/') + 1) + "libgpumemshim_torch.so";
  if (!is_file(bridge)) bridge.clear();
  auto [dir, glob] = pattern_glob(o.output.empty() ? kDefaultPattern : o.output);
  auto before = snapshot(dir, glob);

  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) throw CliError(fmt::format("pipe: {}", std::strerror(errno)));
  std::vector<char*> argv;
  for (const std::string& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  // Like a shell running a foreground job: the child gets the terminal's signals, we wait.
  struct sigaction ignore {}, old_int {}, old_quit {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGINT, &ignore, &old_int);
  ::sigaction(SIGQUIT, &ignore, &old_quit);

  pid_t pid = ::fork();
  if (pid < 0) throw CliError(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGQUIT, &old_quit, nullptr);
    ::setenv("LD_PRELOAD", preload.c_str(), 1);
    if (!o.output.empty()) ::setenv("GPUMEMSHIM_OUTPUT", o.output.c_str(), 1);
    if (!o.stacks.empty()) ::setenv("GPUMEMSHIM_STACKS", o.stacks.c_str(), 1);
    if (!bridge.empty()) ::setenv("GPUMEMSHIM_TORCH_BRIDGE", bridge.c_str(), 0);
    ::execvp(argv[0], argv.data());
    int err = errno;
    ssize_t ignored = ::write(pipefd[1], &err, sizeof err);
    (void)ignored;
    ::_exit(err == ENOENT ? 127 : 126);
  }
  ::close(pipefd[1]);
  int exec_errno = 0;
  ssize_t got;
  do got = ::read(pipefd[0], &exec_errno, sizeof exec_errno);
  while (got < 0 && errno == EINTR);
  ::close(pipefd[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGQUIT, &old_quit, nullptr);
  if (got == static_cast<ssize_t>(sizeof exec_errno))
    throw CliError(fmt::format("{}: cannot run: {}", o.command[0], std::strerror(exec_errno)),
                   exec_errno == ENOENT ? 127 : 126);

  auto after = snapshot(dir, glob);
  for (const auto& [path, stamp] : after) {
    auto it = before.find(path);
    if (it == before.end() || !(it->second == stamp)) fmt::print(stderr, "gpumemshim: trace: {}\n", path);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace gpumemshim::cli

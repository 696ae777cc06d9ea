// `gpumemshim doctor`: what a recording would see on this machine, without recording anything.
// Every probe is best effort: a missing driver, NVML or Python is reported, never fatal (exit 0).
#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"

namespace gpumemshim::cli {

namespace {

constexpr const char* kDefaultPattern = "gpumemshim.%h.%p.trace";  // the shim's default
constexpr const char* kBridgeTag = "gpumemshim-torch-version=";    // torch_hooks/bridge.cpp
constexpr int kPythonTimeoutMs = 60000;

void line(const std::string& key, const std::string& value) {
  fmt::print("{:<14}{}\n", key + ":", value);
}

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string cuda_version(int v) {
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

// Why dlopen failed, short for the common case.
std::string last_dlerror(const char* name) {
  const char* e = ::dlerror();
  std::string text = e ? e : "unknown error";
  if (text.find("No such file") != std::string::npos)
    return fmt::format("{} is not on the library path", name);
  return text;
}

// The file a symbol was loaded from (where the library was found on the search path).
std::string loaded_path(void* sym, const char* fallback) {
  Dl_info info{};
  if (sym && ::dladdr(sym, &info) && info.dli_fname) return info.dli_fname;
  return fallback;
}

void driver() {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    line("CUDA driver", fmt::format("no CUDA driver found ({})", last_dlerror("libcuda.so.1")));
    return;
  }
  using GetVersion = int (*)(int*);
  auto get = reinterpret_cast<GetVersion>(::dlsym(lib, "cuDriverGetVersion"));
  int v = 0;
  if (get && get(&v) == 0)
    line("CUDA driver",
         fmt::format("{} (supports CUDA {})",
                     loaded_path(reinterpret_cast<void*>(get), "libcuda.so.1"), cuda_version(v)));
  else
    line("CUDA driver", "libcuda.so.1 loaded, but cuDriverGetVersion failed");
}

void runtime() {
  for (const char* name :
       {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}) {
    void* lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) continue;
    using GetVersion = int (*)(int*);
    auto get = reinterpret_cast<GetVersion>(::dlsym(lib, "cudaRuntimeGetVersion"));
    int v = 0;
    if (get && get(&v) == 0) {
      line("CUDA runtime",
           fmt::format("{} (CUDA {})", loaded_path(reinterpret_cast<void*>(get), name),
                       cuda_version(v)));
      return;
    }
  }
  line("CUDA runtime", "none on the library path (programs may bring their own, as PyTorch does)");
}

void gpus() {
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    line("GPUs", fmt::format("not listed: no NVML ({})", last_dlerror("libnvidia-ml.so.1")));
    return;
  }
  using Init = int (*)();
  using Count = int (*)(unsigned*);
  using Handle = int (*)(unsigned, void**);
  using Name = int (*)(void*, char*, unsigned);
  struct Memory {
    unsigned long long total, free, used;
  };
  using MemoryInfo = int (*)(void*, Memory*);
  using DriverVersion = int (*)(char*, unsigned);
  auto init = reinterpret_cast<Init>(::dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<Init>(::dlsym(lib, "nvmlShutdown"));
  auto count = reinterpret_cast<Count>(::dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<Handle>(::dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto name = reinterpret_cast<Name>(::dlsym(lib, "nvmlDeviceGetName"));
  auto memory = reinterpret_cast<MemoryInfo>(::dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  auto version = reinterpret_cast<DriverVersion>(::dlsym(lib, "nvmlSystemGetDriverVersion"));
  if (!init || !count || !handle) {
    line("GPUs", "NVML found, but without nvmlInit_v2 / nvmlDeviceGetCount_v2: GPUs not listed");
    return;
  }
  if (int rc = init(); rc != 0) {
    line("GPUs", fmt::format("NVML did not start (nvmlInit_v2 returned {}): GPUs not listed", rc));
    return;
  }
  char text[96] = {};
  if (version && version(text, sizeof text) == 0) line("NVIDIA driver", text);
  unsigned n = 0;
  if (count(&n) != 0) {
    line("GPUs", "NVML cannot count the devices");
  } else {
    line("GPUs", fmt::format("{} (NVML)", n));
    for (unsigned i = 0; i < n; ++i) {
      void* dev = nullptr;
      if (handle(i, &dev) != 0) continue;
      std::string what = "unnamed";
      if (name && name(dev, text, sizeof text) == 0) what = text;
      Memory m{};
      if (memory && memory(dev, &m) == 0)
        what += fmt::format(", {:.1f} GiB, {:.1f} GiB in use", m.total / 1073741824.0,
                            m.used / 1073741824.0);
      fmt::print("  nvml {}: {}\n", i, what);
    }
  }
  if (shutdown) shutdown();
}

// The torch version a bridge was built for, read from the file (loading it needs torch's
// libraries): "" when the file has no tag, nullopt when it cannot be read.
std::optional<std::string> bridge_torch_version(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto at = bytes.find(kBridgeTag);
  if (at == std::string::npos) return "";
  at += std::strlen(kBridgeTag);
  auto end = bytes.find('\0', at);
  return bytes.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// The Python `doctor` asks; runs `python -c SCRIPT` with a time limit and returns its stdout, or
// nullopt with the reason.
std::optional<std::string> run_python(const std::string& python, const std::string& script,
                                      std::string* why) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    *why = fmt::format("pipe: {}", std::strerror(errno));
    return std::nullopt;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    *why = fmt::format("fork: {}", std::strerror(errno));
    ::close(out[0]);
    ::close(out[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    ::dup2(out[1], 1);
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::dup2(devnull, 2);
    }
    ::unsetenv("LD_PRELOAD");  // asking about the modules must not record anything
    const char* argv[] = {python.c_str(), "-c", script.c_str(), nullptr};
    ::execvp(argv[0], const_cast<char**>(argv));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kPythonTimeoutMs);
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    ssize_t got = ::read(out[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    text.append(buf, static_cast<size_t>(got));
  }
  ::close(out[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    *why = fmt::format("{} did not answer within {} s", python, kPythonTimeoutMs / 1000);
    return std::nullopt;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *why = WIFEXITED(status) && WEXITSTATUS(status) == 127 ? fmt::format("{} not found", python)
                                                           : fmt::format("{} failed", python);
    return std::nullopt;
  }
  return text;
}

// Versions from the installed files, never by importing the modules: importing torch or JAX can
// take seconds and start CUDA. torch's comes from torch/version.py, as the bridge's build reads it.
constexpr const char* kPythonScript = R"PY(
import json, os, re, sys
import importlib.util as util
try:
    from importlib import metadata
except ImportError:
    metadata = None
def dist_version(names):
    for name in names:
        try:
            return metadata.version(name)
        except Exception:
            pass
    return "unknown"
def found(module):
    try:
        return util.find_spec(module)
    except Exception:
        return None
out = {"python": sys.version.split()[0], "executable": sys.executable}
spec = found("torch")
if spec is not None:
    version = None
    for where in spec.submodule_search_locations or []:
        try:
            with open(os.path.join(where, "version.py")) as f:
                m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", f.read(), re.M)
                version = m and m.group(1)
        except OSError:
            pass
    out["torch"] = version or dist_version(["torch"])
if found("jax") is not None:
    out["jax"] = dist_version(["jax"])
if found("cupy") is not None:
    out["cupy"] = dist_version(["cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x"])
print(json.dumps(out))
)PY";

void python_modules(const DoctorOptions& o, const std::optional<std::string>& bridge_version) {
  std::string python = o.python;
  if (python.empty())
    if (const char* env = std::getenv("GPUMEMSHIM_PYTHON"); env && *env) python = env;
  if (python.empty()) python = "python3";
  std::string why;
  auto text = run_python(python, kPythonScript, &why);
  nlohmann::json info;
  if (text) {
    try {
      info = nlohmann::json::parse(*text);
    } catch (const nlohmann::json::exception&) {
      why = fmt::format("{} gave no answer", python);
      text.reset();
    }
  }
  if (!text || !info.is_object()) {
    line("Python", fmt::format("not asked: {}", why));
    return;
  }
  line("Python", fmt::format("{} ({})", info.value("python", "?"), info.value("executable", "?")));
  std::string torch = info.value("torch", "");
  if (torch.empty()) {
    line("  torch", "not installed");
  } else if (!bridge_version) {
    line("  torch", fmt::format("{}; no torch bridge: runtime-level events only", torch));
  } else if (bridge_version->empty() || *bridge_version == torch) {
    line("  torch", fmt::format("{}; the torch bridge fits: tensor-level events", torch));
  } else {
    line("  torch", fmt::format("{}; the torch bridge was built for torch {}: it will not be "
                                "loaded (runtime-level events only)",
                                torch, *bridge_version));
  }
  for (const char* module : {"jax", "cupy"}) {
    std::string v = info.value(module, "");
    line(fmt::format("  {}", module), v.empty() ? "not installed" : v);
  }
}

std::string absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[4096];
  if (!::getcwd(cwd, sizeof cwd)) return path;
  return path.empty() || path == "." ? std::string(cwd) : std::string(cwd) + "/" + path;
}

// The pattern with %h filled in (the others are the process's own), made absolute.
std::string shown_pattern(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'h') {
      char host[256] = {};
      if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "unknown");
      out += host;
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return absolute(out);
}

void output() {
  const char* env = std::getenv("GPUMEMSHIM_OUTPUT");
  std::string pattern = env && *env ? env : kDefaultPattern;
  line("traces", fmt::format("{} ({}; %p pid, %r rank, %t start time)", shown_pattern(pattern),
                             env && *env ? "GPUMEMSHIM_OUTPUT" : "the default"));
  std::string dir = pattern.find('/') == std::string::npos
                        ? "."
                        : (pattern.rfind('/') == 0 ? "/" : pattern.substr(0, pattern.rfind('/')));
  std::string shown = absolute(dir);
  if (dir.find('%') != std::string::npos) {
    line("output dir", fmt::format("{}: depends on the process (a % in the directory)", shown));
    return;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    line("output dir", fmt::format("{}: not writable ({})", shown, std::strerror(errno)));
  } else if (!S_ISDIR(st.st_mode)) {
    line("output dir", fmt::format("{}: not writable (not a directory)", shown));
  } else if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    line("output dir", fmt::format("{}: not writable ({})", shown, std::strerror(errno)));
  } else {
    line("output dir", fmt::format("{}: writable", shown));
  }
}

}  // namespace

int run_doctor(const DoctorOptions& o) {
  fmt::print("gpumemshim {}\n", GPUMEMSHIM_VERSION);
  std::string why;
  auto shim = locate_shim(&why);
  line("shim", shim ? *shim : fmt::format("not found: {}", why));

  std::optional<std::string> bridge_version;
  std::string bridge;
  if (const char* env = std::getenv("GPUMEMSHIM_TORCH_BRIDGE"); env && *env)
    bridge = env;
  else if (shim)
    bridge = shim->substr(0, shim->rfind('/') + 1) + "libgpumemshim_torch.so";
  if (!bridge.empty() && is_file(bridge)) bridge_version = bridge_torch_version(bridge);
  if (bridge_version)
    line("torch bridge",
         fmt::format("{} (built for torch {})", bridge,
                     bridge_version->empty() ? "of unknown version" : *bridge_version));
  else
    line("torch bridge", "none (built without LibTorch): PyTorch gets runtime-level events only");
  if (shim) {
    std::string boot = shim->substr(0, shim->rfind('/') + 1) + "gpumemshim-python";
    line("Python boot",
         is_file(boot + "/sitecustomize.py")
             ? boot
             : fmt::format("none beside the shim: no automatic torch bridge ({})", boot));
  }

  driver();
  runtime();
  gpus();
  python_modules(o, bridge_version);
  output();
  return kExitClean;
}

}  // namespace gpumemshim::cli

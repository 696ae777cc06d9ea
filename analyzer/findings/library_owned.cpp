#include "findings/library_owned.h"

#include <array>
#include <span>

#include "report/stack_view.h"

namespace gpumemshim::analyzer {

namespace {

// A function whose allocations (its own and those of everything it calls) the library keeps: a
// name as demangled, without arguments; a trailing '*' matches any name it begins.
struct Maker {
  std::string_view function;
  std::string_view what;
};

struct Library {
  std::string_view id;
  std::string_view name;
  std::string_view module;  // file name prefix of its shared libraries ("" none)
  // Non-empty when everything allocated inside its module is its own, not only under `makers`
  // (NCCL allocates its buffers lazily, deep inside any call): what that memory is.
  std::string_view module_owns;
  std::span<const Maker> makers;
  // Functions that allocate memory for the caller to own (and free): never the library's.
  std::span<const std::string_view> callers_memory;
};

// Only the calls that make a handle, plan, communicator or workspace: memory a library allocates
// while it computes (a GEMM's temporary workspace) is freed when the call returns, and a survivor
// there is worth reporting.
constexpr Maker kCublas[] = {
    {"cublasCreate_v2", "handle"}, {"cublasCreate", "handle"}, {"cublasXtCreate", "handle"}};
constexpr Maker kCublasLt[] = {{"cublasLtCreate", "handle"}};
constexpr Maker kCudnn[] = {{"cudnnCreate", "handle"}};
constexpr Maker kCusparse[] = {{"cusparseCreate", "handle"}};
constexpr Maker kCusolver[] = {{"cusolverDnCreate", "handle"},
                               {"cusolverSpCreate", "handle"},
                               {"cusolverRfCreate", "handle"},
                               {"cusolverMgCreate", "handle"}};
constexpr Maker kCufft[] = {{"cufftCreate", "plan"},   {"cufftPlan1d", "plan"},
                            {"cufftPlan2d", "plan"},   {"cufftPlan3d", "plan"},
                            {"cufftPlanMany", "plan"}, {"cufftMakePlan*", "plan"}};
// NCCL named by function too, for a build that links it statically (then its module is another).
constexpr Maker kNccl[] = {{"ncclCommInit*", "communicator buffers"},
                           {"ncclCommSplit", "communicator buffers"}};
constexpr std::string_view kNcclCallersMemory[] = {"ncclMemAlloc"};
// PyTorch's cuBLAS/cuBLASLt workspaces (one per handle and stream, through its caching allocator)
// and the handle pools' getters (at::cuda's, at::native's), which make a thread's handle at its
// first use and keep it for the process.
constexpr Maker kTorch[] = {{"at::cuda::getNewWorkspace", "cuBLAS workspace"},
                            {"at::cuda::getNewCUDABlasLtWorkspace", "cuBLASLt workspace"},
                            {"at::cuda::getCUDABlasLtWorkspace", "cuBLASLt workspace"},
                            {"at::cuda::getCurrentCUDABlasHandle", "cuBLAS handle and workspace"},
                            {"at::cuda::getCurrentCUDABlasLtHandle", "cuBLASLt handle"},
                            {"at::cuda::getCurrentCUDASparseHandle", "cuSPARSE handle"},
                            {"at::cuda::getCurrentCUDASolverDnHandle", "cuSOLVER handle"},
                            {"at::native::getCudnnHandle", "cuDNN handle"}};

// The table. Innermost wins: cublasCreate_v2 under at::cuda::getCurrentCUDABlasHandle is cuBLAS's.
// "libcublas" also prefixes libcublasLt, whose frames are then passed through as cuBLAS's.
constexpr Library kLibraries[] = {
    {"cublas", "cuBLAS", "libcublas", "", kCublas, {}},
    {"cublaslt", "cuBLASLt", "libcublasLt", "", kCublasLt, {}},
    {"cudnn", "cuDNN", "libcudnn", "", kCudnn, {}},
    {"cusparse", "cuSPARSE", "libcusparse", "", kCusparse, {}},
    {"cusolver", "cuSOLVER", "libcusolver", "", kCusolver, {}},
    {"cufft", "cuFFT", "libcufft", "", kCufft, {}},
    {"nccl", "NCCL", "libnccl", "communicator buffers", kNccl, kNcclCallersMemory},
    {"torch", "PyTorch", "", "", kTorch, {}},
};

std::string_view base_name(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// A demangled name without its arguments and clone suffix ("at::cuda::getNewWorkspace() [clone
// .cold]" -> "at::cuda::getNewWorkspace"); "(anonymous namespace)" is part of the name.
std::string_view bare_name(std::string_view fn) {
  constexpr std::string_view kAnonymous = "(anonymous namespace)";
  for (size_t i = 0; i < fn.size(); ++i) {
    if (fn[i] == ' ' && fn.substr(i).starts_with(" [clone")) return fn.substr(0, i);
    if (fn[i] != '(') continue;
    if (fn.substr(i).starts_with(kAnonymous)) {
      i += kAnonymous.size() - 1;
      continue;
    }
    return fn.substr(0, i);
  }
  return fn;
}

bool names(std::string_view pattern, std::string_view name) {
  if (pattern.ends_with('*')) return name.starts_with(pattern.substr(0, pattern.size() - 1));
  return name == pattern;
}

const Maker* maker_of(const Library& lib, std::string_view name) {
  for (const Maker& m : lib.makers)
    if (names(m.function, name)) return &m;
  return nullptr;
}

bool is_callers_memory(const Library& lib, std::string_view name) {
  for (std::string_view c : lib.callers_memory)
    if (names(c, name)) return true;
  return false;
}

bool in_module(const Library& lib, const Frame& f) {
  return !lib.module.empty() && !f.python && base_name(f.module).starts_with(lib.module);
}

// PyTorch's own native code and the C/C++ runtime: between a library's call and the allocation it
// makes (the caching allocator, std::call_once), never the program's.
bool is_machinery(const Frame& f) {
  std::string_view m = base_name(f.module);
  return m.starts_with("libc10") || m.starts_with("libtorch") || m.starts_with("libcaffe2") ||
         m.starts_with("libstdc++") || m.starts_with("libc.so") || m.starts_with("libc-") ||
         m.starts_with("libpthread") || m.starts_with("libgcc_s") || m.starts_with("ld-linux");
}

bool passes_through(const Frame& f) {
  if (f.python) return false;
  if (is_cuda_internal(f) || is_machinery(f)) return true;
  for (const Library& lib : kLibraries)
    if (in_module(lib, f)) return true;
  return false;
}

// The frame's function, else its module's file name (a library without symbols).
std::string call_name(const Frame& f) {
  std::string_view name = bare_name(f.function);
  return std::string(name.empty() ? base_name(f.module) : name);
}

}  // namespace

std::optional<LibraryOwner> library_owner(const std::vector<Frame>& native) {
  const Library* module_owner = nullptr;  // a library that owns its module, once inside it
  size_t last = 0;                        // the outermost frame of that module so far
  auto owned_by_module = [&]() -> std::optional<LibraryOwner> {
    if (!module_owner) return std::nullopt;
    return LibraryOwner{module_owner->id, module_owner->name, module_owner->module_owns,
                        call_name(native[last]), last};
  };
  for (size_t i = 0; i < native.size(); ++i) {
    const Frame& f = native[i];
    if (f.python) break;
    const std::string_view name = bare_name(f.function);
    for (const Library& lib : kLibraries) {
      if (name.empty()) break;
      if (is_callers_memory(lib, name)) return std::nullopt;
      if (module_owner) continue;  // the innermost library decides
      if (const Maker* m = maker_of(lib, name))
        return LibraryOwner{lib.id, lib.name, m->what, std::string(name), i};
    }
    if (module_owner && in_module(*module_owner, f)) {
      last = i;
      continue;
    }
    if (!module_owner) {
      for (const Library& lib : kLibraries)
        if (!lib.module_owns.empty() && in_module(lib, f)) module_owner = &lib;
      if (module_owner) {
        last = i;
        continue;
      }
    }
    if (!passes_through(f)) break;
  }
  return owned_by_module();
}

bool is_library_frame(const Frame& f) {
  if (f.python) return false;
  const std::string_view name = bare_name(f.function);
  for (const Library& lib : kLibraries)
    if (in_module(lib, f) || (!name.empty() && maker_of(lib, name))) return true;
  return false;
}

std::vector<Frame> library_frames(const std::vector<Frame>& native, const LibraryOwner& owner) {
  const Library* lib = nullptr;
  for (const Library& l : kLibraries)
    if (l.id == owner.id) lib = &l;
  std::vector<Frame> out;
  for (size_t i = 0; i <= owner.frame && i < native.size(); ++i) {
    const Frame& f = native[i];
    if (i == owner.frame || (lib && in_module(*lib, f) && !is_cuda_internal(f))) out.push_back(f);
  }
  return out;
}

}  // namespace gpumemshim::analyzer

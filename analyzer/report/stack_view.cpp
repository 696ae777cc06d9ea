#include "report/stack_view.h"

#include <cxxabi.h>

#include <charconv>
#include <cstdlib>
#include <iterator>

#include "report/python_lines.h"

namespace gpumemshim::analyzer {

namespace {
std::string_view base_name(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}
}  // namespace

// A statically linked cudart's functions carry no line information and are named cudaX / cuX /
// cudart::... / __cudartNNN / libcudart_static_<hash>.
bool is_cuda_internal(const Frame& f) {
  std::string_view module = base_name(f.module);
  if (module.starts_with("libcudart") || module.starts_with("libcuda.") ||
      module.starts_with("libnvidia"))
    return true;
  // CUDA's header templates (cudaMalloc<T> in cuda_runtime.h) are inlined into the caller.
  std::string_view file = base_name(f.file);
  if (file.starts_with("cuda_runtime") || file == "cuda.h") return true;
  if (!f.file.empty()) return false;
  std::string_view fn = f.function;
  if (fn.starts_with("cudart::") || fn.starts_with("__cudart") ||
      fn.starts_with("libcudart_static_"))  // CUDA 13's static cudart names its internals so
    return true;
  auto api_like = [&](std::string_view prefix) {
    return fn.size() > prefix.size() && fn.starts_with(prefix) && fn[prefix.size()] >= 'A' &&
           fn[prefix.size()] <= 'Z';
  };
  return api_like("cuda") || api_like("cu");
}

bool is_python_internal(const Frame& f) {
  std::string_view module = base_name(f.module);
  if (module.starts_with("libpython") || module.starts_with("python") ||
      module.starts_with("_ctypes") || module.starts_with("libffi"))
    return true;
  std::string_view fn = f.function;
  return fn.starts_with("_Py") || fn.starts_with("Py") || fn.starts_with("ffi_") ||
         fn.starts_with("_ctypes_") || fn.starts_with("_call_function_pointer") ||
         fn.starts_with("PyCFuncPtr_") || fn.starts_with("cfunction_") ||
         fn.starts_with("method_vectorcall") || fn.starts_with("pymain_");
}

bool is_python_eval(const Frame& f) {
  return f.function == "_PyEval_EvalFrameDefault";
}

bool is_xla_module(std::string_view path) {
  for (std::string_view folder : {"/jaxlib/", "/jax_plugins/", "/jax_cuda"})
    if (path.find(folder) != std::string_view::npos) return true;
  const std::string_view file = base_name(path);
  return file.starts_with("xla_") || file.starts_with("libjax") || file.starts_with("_jax.");
}

bool is_cupy_module(std::string_view path) {
  for (std::string_view folder : {"/cupy/", "/cupy_backends/", "/cupyx/"})
    if (path.find(folder) != std::string_view::npos) return true;
  return base_name(path).starts_with("cupy");
}

bool is_framework_frame(const Frame& f) {
  if (f.python) return false;
  std::string_view module = base_name(f.module);
  return module.starts_with("libc10") || module.starts_with("libtorch") ||
         module.starts_with("libcaffe2") || module.starts_with("_C.") || is_xla_module(f.module) ||
         is_cupy_module(f.module) || is_python_internal(f) || is_cuda_internal(f);
}

bool is_framework_python_frame(const Frame& f) {
  if (!f.python) return false;
  std::string_view file = f.file;
  for (std::string_view package : {"torch/", "jax/", "jaxlib/", "cupy/", "cupyx/"})
    for (std::string_view root : {"/site-packages/", "/dist-packages/"})
      if (const size_t at = file.find(root);
          at != std::string_view::npos && file.substr(at + root.size()).starts_with(package))
        return true;
  return file.find("/gpumemshim/_autoattach.py") != std::string_view::npos ||
         file.find("/gpumemshim/__init__.py") != std::string_view::npos ||
         file.starts_with("<frozen importlib");
}

namespace {
// The grad_fn a native autograd frame runs (torch::autograd::generated::MmBackward0::apply →
// "MmBackward0"), or "" when the frame is not one.
std::string_view grad_fn_name(const Frame& f) {
  std::string_view fn = f.function;
  size_t apply = fn.find("::apply(");
  if (apply == std::string_view::npos) {
    if (!fn.ends_with("::apply")) return {};
    apply = fn.size() - 7;
  }
  std::string_view cls = fn.substr(0, apply);
  size_t colon = cls.rfind("::");
  if (colon != std::string_view::npos) cls = cls.substr(colon + 2);
  return cls.find("Backward") != std::string_view::npos ? cls : std::string_view{};
}

// One Python frame, named from its PyCode record (unknown code ids keep what is known: nothing).
Frame python_frame(const LoadedTrace& trace, const format::PyFrameRef& ref) {
  Frame f;
  f.python = true;
  auto it = trace.py_codes.find(ref.code_id);
  if (it == trace.py_codes.end()) {
    f.function = "?";
    return f;
  }
  const PyCodeInfo& code = it->second;
  f.function = code.name;
  f.file = code.filename;
  int64_t line =
      line_for_offset(code.line_table, static_cast<int64_t>(code.first_line), ref.instr_offset);
  f.line = static_cast<uint32_t>(line > 0 ? line : static_cast<int64_t>(code.first_line));
  return f;
}

// Native frames (one inner vector per pc, inlined frames first) merged with Python frames: each
// _PyEval_EvalFrameDefault pc is replaced by the Python frames of one eval loop invocation
// (innermost first; an invocation ends at a frame with the entry flag), interpreter/libffi/ctypes
// frames are dropped. Python frames left over (a truncated native stack) go at the end; with no
// eval frame symbolized at all, the Python frames follow the native frames above the interpreter.
std::vector<Frame> merge_python(const LoadedTrace& trace,
                                const std::vector<const std::vector<Frame>*>& native,
                                const std::vector<format::PyFrameRef>& py) {
  std::vector<std::vector<Frame>> groups(1);
  for (const format::PyFrameRef& ref : py) {
    groups.back().push_back(python_frame(trace, ref));
    if (ref.flags & format::kPyFrameEntry) groups.emplace_back();
  }
  if (groups.back().empty()) groups.pop_back();
  auto is_eval_pc = [](const std::vector<Frame>& fs) {
    for (const Frame& f : fs)
      if (is_python_eval(f)) return true;
    return false;
  };
  bool any_eval = false;
  for (const auto* fs : native) any_eval = any_eval || is_eval_pc(*fs);
  std::vector<Frame> out;
  size_t next = 0;
  bool inserted = false;
  for (const auto* fs : native) {
    if (is_eval_pc(*fs)) {
      if (next < groups.size())
        for (Frame& f : groups[next++]) out.push_back(std::move(f));
      inserted = true;
      continue;
    }
    bool internal = !fs->empty() && is_python_internal(fs->back());
    if (!any_eval && internal && !inserted) {  // no eval symbol: Python frames go here, once
      for (; next < groups.size(); ++next)
        for (Frame& f : groups[next]) out.push_back(std::move(f));
      inserted = true;
    }
    if (internal) continue;
    out.insert(out.end(), fs->begin(), fs->end());
  }
  for (; next < groups.size(); ++next)
    for (Frame& f : groups[next]) out.push_back(std::move(f));
  return out;
}
}  // namespace

StackView::StackView(const LoadedTrace& trace, size_t max_frames)
    : trace_(trace),
      max_frames_(max_frames),
      symbolizer_(trace.symbols ? trace.symbols->take() : Symbolizer()) {
  // Those the warm-up had are in already, in the same order.
  for (const ModuleInfo& m : trace.modules) symbolizer_.add_module(m);
}

StackView::PcFrames& StackView::pc_entry(uint64_t pc, bool is_return_address) {
  auto [it, inserted] = pc_frames_[is_return_address].try_emplace(pc);
  PcFrames& out = it->second;
  if (inserted) {
    out.module = symbolizer_.module_for(pc);
    out.shim = out.module != nullptr && is_shim_module(out.module->path);
  }
  return out;
}

const std::vector<Frame>& StackView::symbolized(PcFrames& out, uint64_t pc,
                                                bool is_return_address) {
  if (out.symbolized) return out.frames;
  out.symbolized = true;
  const ModuleInfo* m = out.module;
  std::vector<SourceFrame> sf = symbolizer_.symbolize(pc, is_return_address);
  if (sf.empty()) sf.push_back(SourceFrame{{}, {}, 0, m ? m->path : std::string(), pc, false});
  out.frames.reserve(sf.size());
  for (SourceFrame& s : sf) {
    Frame& f = out.frames.emplace_back();
    f.function = std::move(s.function);
    f.file = std::move(s.file);
    f.line = s.line;
    f.module = s.module.empty() && m ? m->path : std::move(s.module);
    f.pc = pc;
    f.module_offset = m ? pc - m->load_bias : 0;
    f.inlined = s.inlined;
  }
  return out.frames;
}

std::vector<const std::vector<Frame>*> StackView::native_groups(const std::vector<uint64_t>& pcs) {
  std::vector<const std::vector<Frame>*> groups;
  groups.reserve(pcs.size());
  bool skipping = true;
  for (size_t i = 0; i < pcs.size(); ++i) {
    const bool is_return_address = i > 0;  // looked up at pc-1: the call's line
    PcFrames& p = pc_entry(pcs[i], is_return_address);
    if (skipping && p.shim) continue;  // the shim's leading frames: not even symbolized
    skipping = false;
    groups.push_back(&symbolized(p, pcs[i], is_return_address));
  }
  return groups;
}

// The frame that names a grad_fn ("MmBackward0"), as the analyzer shows it.
static Frame grad_fn_frame(std::string name) {
  Frame f;
  f.function = std::move(name);
  f.module = "grad_fn";
  return f;
}

// The frame a StackLabel stands for: the grad_fn's class name from its C++ type name.
static Frame label_frame(const std::string& label) {
  // typeid names are mangled type names ("N5torch8autograd9generated11MmBackward0E").
  int status = 0;
  char* demangled = abi::__cxa_demangle(label.c_str(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : label;
  std::free(demangled);
  size_t colon = name.rfind("::");
  return grad_fn_frame(colon == std::string::npos ? name : name.substr(colon + 2));
}

// An autograd-thread event inside a backward pass: the library that made it (its own frames,
// when it is library-owned), then the grad_fn it ran (named by the bridge, or found among its
// native frames), else its innermost frame outside PyTorch; then the backward() caller's stack.
std::vector<Frame> StackView::attributed_frames(uint64_t own_id, uint64_t caller_id) {
  std::vector<Frame> out;
  if (trace_.stack_labels.count(own_id)) {
    out = frames(own_id);
  } else {
    const std::vector<Frame> raw = raw_frames(own_id);
    out = owner_frames(own_id, raw);
    for (const Frame& f : raw) {
      if (std::string_view name = grad_fn_name(f); !name.empty()) {
        out.push_back(grad_fn_frame(std::string(name)));
        break;
      }
    }
  }
  if (out.empty()) {
    for (const Frame& f : frames(own_id)) {
      if (is_framework_frame(f)) continue;
      out.push_back(f);
      break;
    }
  }
  const std::vector<Frame>& caller = frames(caller_id);
  out.insert(out.end(), caller.begin(), caller.end());
  if (out.size() > max_frames_) out.resize(max_frames_);
  return out;
}

// A stack named by a label (a grad_fn): the label, after the frames of the library that made the
// allocation when the shim also walked its native stack.
std::vector<Frame> StackView::labeled_frames(uint64_t stack_id, const std::string& label) {
  std::vector<Frame> out = owner_frames(stack_id, raw_frames(stack_id));
  out.push_back(label_frame(label));
  if (out.size() > max_frames_) out.resize(max_frames_);
  return out;
}

std::vector<Frame> StackView::owner_frames(uint64_t own_id, const std::vector<Frame>& raw) {
  const std::optional<LibraryOwner>& owner = library_owner(own_id);
  return owner ? library_frames(raw, *owner) : std::vector<Frame>{};
}

const std::optional<LibraryOwner>& StackView::library_owner(uint64_t stack_id) {
  if (auto known = owners_.find(stack_id); known != owners_.end()) return known->second;
  uint64_t own = stack_id;
  if (auto a = trace_.attributed_stacks.find(stack_id); a != trace_.attributed_stacks.end())
    own = a->second.first;
  return owners_.emplace(stack_id, analyzer::library_owner(raw_frames(own))).first->second;
}

const std::string& StackView::asking_module(uint64_t stack_id) {
  if (auto known = askers_.find(stack_id); known != askers_.end()) return known->second;
  uint64_t own = stack_id;
  if (auto a = trace_.attributed_stacks.find(stack_id); a != trace_.attributed_stacks.end())
    own = a->second.first;
  std::string module;
  for (const Frame& f : raw_frames(own)) {
    if (f.python || is_cuda_internal(f) || f.module.empty()) continue;
    module = f.module;
    break;
  }
  return askers_.emplace(stack_id, std::move(module)).first->second;
}

// Symbolized native (and Python) frames, before any frame is dropped.
std::vector<Frame> StackView::raw_frames(uint64_t stack_id) {
  std::vector<Frame> out;
  auto it = trace_.stacks.find(stack_id);
  if (it == trace_.stacks.end()) return out;
  for (const auto* group : native_groups(it->second))
    out.insert(out.end(), group->begin(), group->end());
  return out;
}

const std::vector<Frame>& StackView::frames(uint64_t stack_id) {
  auto cached = cache_.find(stack_id);
  if (cached != cache_.end()) return cached->second;
  if (auto a = trace_.attributed_stacks.find(stack_id); a != trace_.attributed_stacks.end()) {
    std::vector<Frame> composed = attributed_frames(a->second.first, a->second.second);
    return cache_[stack_id] = std::move(composed);
  }
  if (auto l = trace_.stack_labels.find(stack_id); l != trace_.stack_labels.end()) {
    std::vector<Frame> labeled = labeled_frames(stack_id, l->second);
    return cache_[stack_id] = std::move(labeled);
  }
  std::vector<Frame>& out = cache_[stack_id];
  auto it = trace_.stacks.find(stack_id);
  if (stack_id == 0 || it == trace_.stacks.end()) return out;
  std::vector<const std::vector<Frame>*> native = native_groups(it->second);
  auto py = trace_.py_stacks.find(stack_id);
  if (py != trace_.py_stacks.end() && !py->second.empty()) {
    out = merge_python(trace_, native, py->second);
  } else {
    size_t n = 0;
    for (const auto* group : native) n += group->size();
    out.reserve(n);
    for (const auto* group : native) out.insert(out.end(), group->begin(), group->end());
  }
  // The innermost user-meaningful frame first. CUDA's own frames above it go; in a Python program
  // so does the framework's C++ between the script's line and the CUDA call (PyTorch's dispatcher
  // and caching allocator, the interpreter). A native frame of any other library (a user's
  // extension) stays first. A stack made only of such frames is kept whole.
  bool has_python = false;
  for (const Frame& f : out) has_python = has_python || f.python;
  size_t first_user = 0;
  while (first_user < out.size() && !out[first_user].python &&
         (has_python ? is_framework_frame(out[first_user]) : is_cuda_internal(out[first_user])))
    ++first_user;
  if (first_user < out.size()) out.erase(out.begin(), out.begin() + static_cast<long>(first_user));
  // Then the framework's own Python (torch's modules, this package's wrappers) above the script's
  // line, when the script has a line further out.
  if (has_python) {
    size_t first_script = 0;
    while (first_script < out.size() &&
           (!out[first_script].python ? is_framework_frame(out[first_script])
                                      : is_framework_python_frame(out[first_script])))
      ++first_script;
    if (first_script < out.size() && first_script > 0)
      out.erase(out.begin(), out.begin() + static_cast<long>(first_script));
  }
  if (out.size() > max_frames_) out.resize(max_frames_);
  return out;
}

// "function|file|line|module;" per frame, or "module+0xoffset;" for a frame without symbols (the
// text fmt's "{}|{}|{}|{};" and "{}+{:#x};" give), appended piece by piece: every site asks.
std::string StackView::stable_key(const std::vector<Frame>& frames) {
  std::string key;
  char num[24];
  for (const Frame& f : frames) {
    if (!f.function.empty() || !f.file.empty()) {
      key += f.function;
      key += '|';
      key += f.file;
      key += '|';
      key.append(num, std::to_chars(num, std::end(num), f.line).ptr);
      key += '|';
      key += base_name(f.module);
    } else {
      key += base_name(f.module);
      key += "+0x";
      key.append(num, std::to_chars(num, std::end(num), f.module_offset, 16).ptr);
    }
    key += ';';
  }
  return key;
}

const std::string& StackView::stable_key(uint64_t stack_id) {
  auto [it, inserted] = keys_.try_emplace(stack_id);
  if (inserted) it->second = stable_key(frames(stack_id));
  return it->second;
}

}  // namespace gpumemshim::analyzer

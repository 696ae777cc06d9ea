// Offline symbolizer over elfutils libdwfl.
//
// Design:
//  * Every module gets its own Dwfl holding exactly that one module. Modules are opened lazily,
//    the first time a pc inside them is symbolized, so traces from processes with hundreds of
//    mapped libraries only pay for the few that appear in stacks, add_module() may come before
//    or after symbolize(), and overlapping ranges (a library unloaded and another loaded at the
//    same address) never confuse libdwfl's address map. Our own sorted table answers
//    module_for(); where ranges overlap, the module added last wins.
//  * dwfl_report_elf is called with add_p_vaddr = true: libdwfl then takes `base` as the load
//    bias (dlpi_addr). With add_p_vaddr = false it would take `base` as the address of the first
//    PT_LOAD, which differs from the bias whenever that segment's p_vaddr is not 0.
//  * Build-id check: a file whose build-id differs from the recorded one is not trusted; the
//    /usr/lib/debug/.build-id/xx/rest.debug file is tried instead (it carries the DWARF and
//    .symtab for the recorded build). Without either, frames carry only module and pc.
//  * Inlined frames follow eu-addr2line -i: dwarf_getscopes finds the innermost scope,
//    dwarf_getscopes_die gives its lexical chain, and each DW_TAG_inlined_subroutine's
//    DW_AT_call_file/DW_AT_call_line becomes the location of the next outer frame.
#include "symbolize/symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <unordered_map>
#include <utility>

namespace gpumemshim::analyzer {
namespace {

// libdwfl keeps a pointer to the callbacks; they must outlive every Dwfl.
Dwfl_Callbacks g_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,  // default ":.debug:/usr/lib/debug"
};

std::string demangle(const char* name) {
  if (name == nullptr) return {};
  if (name[0] == '_' && name[1] == 'Z') {
    int status = 0;
    char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (d != nullptr) {
      std::string out = (status == 0) ? std::string(d) : std::string(name);
      std::free(d);
      return out;
    }
  }
  return name;
}

// Name of a subprogram / inlined_subroutine DIE, following DW_AT_abstract_origin and
// DW_AT_specification. Prefers the linkage name (demangled: qualified, with parameters).
std::string die_function_name(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  const char* n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
  if (n == nullptr) n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
  if (n == nullptr) n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
  return demangle(n);
}

// libdw already prefixes file names with their include directory, directory 0 being the
// compilation directory. A relative result is relative to the compilation directory, unless it
// already starts with a relative comp_dir (-fdebug-prefix-map=...=.), which must not be doubled.
std::string join_path(const char* file, const char* comp_dir) {
  if (file == nullptr) return {};
  if (file[0] == '/' || comp_dir == nullptr || comp_dir[0] == '\0') return file;
  std::string dir = comp_dir;
  if (dir.back() != '/') dir.push_back('/');
  if (dir[0] != '/' && std::strncmp(file, dir.c_str(), dir.size()) == 0) return file;
  return dir + file;
}

bool is_function_scope(Dwarf_Die* die) {
  const int tag = dwarf_tag(die);
  return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
         tag == DW_TAG_entry_point;
}

std::string hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

std::string module_build_id(Dwfl_Module* mod) {
  GElf_Addr bias = 0;
  dwfl_module_getelf(mod, &bias);  // makes the build-id determinable
  const unsigned char* bits = nullptr;
  GElf_Addr vaddr = 0;
  const int len = dwfl_module_build_id(mod, &bits, &vaddr);
  if (len <= 0 || bits == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(bits), static_cast<size_t>(len));
}

struct DwflCloser {
  void operator()(Dwfl* d) const {
    if (d != nullptr) dwfl_end(d);
  }
};
using DwflPtr = std::unique_ptr<Dwfl, DwflCloser>;

// One Dwfl holding a single module reported from `file` at load bias `bias`.
std::pair<DwflPtr, Dwfl_Module*> open_module(const std::string& name, const std::string& file,
                                             uint64_t bias) {
  DwflPtr dwfl(dwfl_begin(&g_callbacks));
  if (!dwfl) return {nullptr, nullptr};
  dwfl_report_begin(dwfl.get());
  Dwfl_Module* mod = dwfl_report_elf(dwfl.get(), name.c_str(), file.c_str(), -1, bias,
                                     /*add_p_vaddr=*/true);
  if (dwfl_report_end(dwfl.get(), nullptr, nullptr) != 0 || mod == nullptr) {
    return {nullptr, nullptr};
  }
  return {std::move(dwfl), mod};
}

}  // namespace

struct Symbolizer::Impl {
  enum class State { kUnloaded, kTrusted, kOffsetOnly, kMissing };

  struct Entry {
    ModuleInfo info;
    uint64_t seq = 0;  // insertion order; later wins on overlap
    State state = State::kUnloaded;
    bool prepared = false;  // prepare() came here
    DwflPtr dwfl;
    Dwfl_Module* mod = nullptr;
  };

  std::vector<std::unique_ptr<Entry>> entries;  // insertion order, stable addresses
  std::vector<Entry*> by_start;                 // sorted by info.start
  std::vector<uint64_t> max_end;                // max_end[i] = max end of by_start[0..i]
  std::set<std::pair<std::string, uint64_t>> seen;
  std::unordered_map<uint64_t, std::vector<SourceFrame>> cache[2];  // [is_return_address]

  void add(const ModuleInfo& m);
  void rebuild_index();
  Entry* find(uint64_t addr) const;
  void load(Entry& e);
  std::vector<SourceFrame> resolve(uint64_t pc, bool is_return_address);
  void resolve_trusted(Entry& e, uint64_t addr, SourceFrame& base, std::vector<SourceFrame>& out);
};

void Symbolizer::Impl::add(const ModuleInfo& m) {
  if (!seen.emplace(m.path, m.load_bias).second) return;
  auto e = std::make_unique<Entry>();
  e->info = m;
  e->seq = entries.size();
  if (e->info.size == 0 && !e->info.path.empty()) {
    // No range recorded: take it from the file's program headers.
    load(*e);
    if (e->mod != nullptr) {
      Dwarf_Addr low = 0, high = 0;
      dwfl_module_info(e->mod, nullptr, &low, &high, nullptr, nullptr, nullptr, nullptr);
      if (high > low) {
        e->info.start = low;
        e->info.size = high - low;
      }
    }
  }
  entries.push_back(std::move(e));
  rebuild_index();
  // A pc that was unknown (or in an overlapped module) may resolve differently now.
  cache[0].clear();
  cache[1].clear();
}

void Symbolizer::Impl::rebuild_index() {
  Entry* added = entries.back().get();
  auto pos = std::upper_bound(by_start.begin(), by_start.end(), added->info.start,
                              [](uint64_t s, const Entry* x) { return s < x->info.start; });
  by_start.insert(pos, added);
  max_end.resize(by_start.size());
  uint64_t running = 0;
  for (size_t i = 0; i < by_start.size(); ++i) {
    running = std::max(running, by_start[i]->info.start + by_start[i]->info.size);
    max_end[i] = running;
  }
}

Symbolizer::Impl::Entry* Symbolizer::Impl::find(uint64_t addr) const {
  auto it = std::upper_bound(by_start.begin(), by_start.end(), addr,
                             [](uint64_t a, const Entry* x) { return a < x->info.start; });
  size_t i = static_cast<size_t>(it - by_start.begin());
  Entry* best = nullptr;
  while (i > 0) {
    --i;
    if (max_end[i] <= addr) break;  // nothing at or before i reaches addr
    Entry* e = by_start[i];
    if (addr < e->info.start + e->info.size && (best == nullptr || e->seq > best->seq)) best = e;
  }
  return best;
}

void Symbolizer::Impl::load(Entry& e) {
  if (e.state != State::kUnloaded) return;
  e.state = State::kMissing;
  if (e.info.path.empty()) return;

  auto [dwfl, mod] = open_module(e.info.path, e.info.path, e.info.load_bias);
  if (mod == nullptr) return;  // missing or unreadable file: module-only frames

  if (!e.info.build_id.empty() && module_build_id(mod) != e.info.build_id) {
    // The file on disk is another build. Only a debug file with the recorded build-id will do.
    dwfl.reset();
    mod = nullptr;
    e.state = State::kOffsetOnly;
    const std::string h = hex(e.info.build_id);
    if (h.size() < 4) return;
    const std::string debug =
        "/usr/lib/debug/.build-id/" + h.substr(0, 2) + "/" + h.substr(2) + ".debug";
    if (::access(debug.c_str(), R_OK) != 0) return;
    auto [ddwfl, dmod] = open_module(e.info.path, debug, e.info.load_bias);
    if (dmod == nullptr || module_build_id(dmod) != e.info.build_id) return;
    dwfl = std::move(ddwfl);
    mod = dmod;
  }
  e.dwfl = std::move(dwfl);
  e.mod = mod;
  e.state = State::kTrusted;
}

namespace {

// The innermost source location of addr, from the module's line table.
void line_at(Dwfl_Module* mod, uint64_t addr, std::string& file, uint32_t& line) {
  if (Dwfl_Line* l = dwfl_module_getsrc(mod, addr)) {
    int lineno = 0;
    const char* src = dwfl_lineinfo(l, nullptr, &lineno, nullptr, nullptr, nullptr);
    file = join_path(src, dwfl_line_comp_dir(l));
    line = lineno > 0 ? static_cast<uint32_t>(lineno) : 0;
  }
}

// The scopes around addr, innermost first (the inlined chain, from the DIE tree); free()d by the
// caller. Returns their number (0: none).
int scopes_at(Dwfl_Module* mod, uint64_t addr, Dwarf_Die** scopes) {
  *scopes = nullptr;
  Dwarf_Addr dbias = 0;
  Dwarf_Die* cudie = dwfl_module_addrdie(mod, addr, &dbias);
  if (cudie == nullptr) return 0;
  int nscopes = 0;
  Dwarf_Die* first = nullptr;
  const int n = dwarf_getscopes(cudie, addr - dbias, &first);
  if (n > 0) {
    Dwarf_Die innermost = first[0];  // DIE handles stay valid while the Dwarf lives
    nscopes = dwarf_getscopes_die(&innermost, scopes);
  }
  std::free(first);
  return nscopes;
}

// The source files of a DIE's compilation unit, to name an inline instance's call site.
struct CuFiles {
  Dwarf_Files* files = nullptr;
  const char* comp_dir = nullptr;
};
CuFiles cu_files(Dwarf_Die* die) {
  CuFiles out;
  Dwarf_Die cu;
  if (dwarf_diecu(die, &cu, nullptr, nullptr) == nullptr) return out;
  size_t nfiles = 0;
  if (dwarf_getsrcfiles(&cu, &out.files, &nfiles) != 0) out.files = nullptr;
  Dwarf_Attribute attr;
  out.comp_dir = dwarf_formstring(dwarf_attr(&cu, DW_AT_comp_dir, &attr));
  return out;
}

// An inline instance's call site: the location of the frame outside it.
void call_site(Dwarf_Die* die, const CuFiles& cu, std::string& file, uint32_t& line) {
  Dwarf_Attribute attr;
  Dwarf_Word val = 0;
  file.clear();
  line = 0;
  if (cu.files != nullptr && dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &val) == 0)
    file = join_path(dwarf_filesrc(cu.files, val, nullptr, nullptr), cu.comp_dir);
  if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &val) == 0)
    line = static_cast<uint32_t>(val);
}

// The ELF symbol table's (demangled) name of the function holding addr.
std::string symtab_function(Dwfl_Module* mod, uint64_t addr) {
  GElf_Off offset = 0;
  GElf_Sym sym;
  return demangle(dwfl_module_addrinfo(mod, addr, &offset, &sym, nullptr, nullptr, nullptr));
}

}  // namespace

void Symbolizer::Impl::resolve_trusted(Entry& e, uint64_t addr, SourceFrame& base,
                                       std::vector<SourceFrame>& out) {
  Dwfl_Module* mod = e.mod;
  std::string file;
  uint32_t line = 0;
  line_at(mod, addr, file, line);
  Dwarf_Die* scopes = nullptr;
  const int nscopes = scopes_at(mod, addr, &scopes);
  const CuFiles cu = nscopes > 0 ? cu_files(&scopes[0]) : CuFiles{};
  for (int i = 0; i < nscopes; ++i) {
    Dwarf_Die* die = &scopes[i];
    if (!is_function_scope(die)) continue;
    SourceFrame f = base;
    f.function = die_function_name(die);
    f.file = file;
    f.line = line;
    f.inlined = dwarf_tag(die) == DW_TAG_inlined_subroutine;
    out.push_back(std::move(f));
    if (!out.back().inlined) break;  // the containing (out-of-line) function ends the chain
    call_site(die, cu, file, line);
  }
  std::free(scopes);

  // No DWARF function here (or the chain ended on an inline with no parent): close with the
  // ELF symbol table.
  if (out.empty() || out.back().inlined) {
    SourceFrame f = base;
    f.file = file;
    f.line = line;
    f.function = symtab_function(mod, addr);
    out.push_back(std::move(f));
  } else if (out.back().function.empty()) {
    out.back().function = symtab_function(mod, addr);
  }
}

std::vector<SourceFrame> Symbolizer::Impl::resolve(uint64_t pc, bool is_return_address) {
  const uint64_t addr = (is_return_address && pc > 0) ? pc - 1 : pc;
  SourceFrame base;
  base.pc = pc;
  std::vector<SourceFrame> out;
  Entry* e = find(addr);
  if (e == nullptr) {
    out.push_back(std::move(base));
    return out;
  }
  base.module = e->info.path;
  load(*e);
  if (e->state == State::kTrusted) resolve_trusted(*e, addr, base, out);
  if (out.empty()) out.push_back(std::move(base));
  return out;
}

Symbolizer::Symbolizer() : impl_(std::make_unique<Impl>()) {}
Symbolizer::~Symbolizer() = default;
Symbolizer::Symbolizer(Symbolizer&&) noexcept = default;
Symbolizer& Symbolizer::operator=(Symbolizer&&) noexcept = default;

void Symbolizer::add_module(const ModuleInfo& m) {
  try {
    impl_->add(m);
  } catch (...) {
    // Out of memory: the module stays unknown.
  }
}

std::vector<SourceFrame> Symbolizer::symbolize(uint64_t pc, bool is_return_address) {
  try {
    auto& cache = impl_->cache[is_return_address ? 1 : 0];
    if (auto it = cache.find(pc); it != cache.end()) return it->second;
    std::vector<SourceFrame> frames = impl_->resolve(pc, is_return_address);
    cache.emplace(pc, frames);
    return frames;
  } catch (...) {
    try {
      std::vector<SourceFrame> out(1);
      out[0].pc = pc;
      return out;
    } catch (...) {
      return {};
    }
  }
}

void Symbolizer::prepare(uint64_t pc) {
  try {
    Impl::Entry* e = impl_->find(pc);
    if (e == nullptr || e->prepared) return;
    e->prepared = true;
    impl_->load(*e);
    if (e->state != Impl::State::kTrusted) return;
    Dwarf_Addr bias = 0;
    // The debug sections (decompressed here when compressed), then the index of compilation units
    // that the first address lookup builds, and the ELF symbol table the fallback names come from.
    if (dwfl_module_getdwarf(e->mod, &bias) != nullptr) dwfl_module_addrdie(e->mod, pc, &bias);
    dwfl_module_getsymtab(e->mod);
  } catch (...) {
    // Out of memory: symbolize() opens it when it gets there.
  }
}

const ModuleInfo* Symbolizer::module_for(uint64_t pc) const {
  const Impl::Entry* e = impl_->find(pc);
  return e != nullptr ? &e->info : nullptr;
}

}  // namespace gpumemshim::analyzer

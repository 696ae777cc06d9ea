#include "findings/leaks.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "findings/library_owned.h"
#include "report/analysis.h"
#include "report/stack_view.h"

namespace gpumemshim::analyzer {

namespace {

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

bool by_bytes_desc(const SiteGroup& a, const SiteGroup& b) {
  if (a.bytes != b.bytes) return a.bytes > b.bytes;
  if (a.count != b.count) return a.count > b.count;
  if (a.id != b.id) return a.id < b.id;
  return a.kind < b.kind;
}

// Why a survivor is alive at the end, before the site-level verdict.
enum class Origin : uint8_t {
  kCached,      // a caching allocator's segment (torch events in the trace)
  kRegion,      // allocated inside an expect_no_leak region that was closed
  kOpenRegion,  // allocated inside one never closed (it ends with the trace)
  kNoSteps,     // the trace has no step markers
  kBeforeStep,  // allocated before the first step marker
  kAfterStep,   // allocated after it: a leak only when the site accumulates survivors
  kAddress,     // address space (mappings, reservations)
  kLibrary,     // made by a library for itself (a handle, a workspace): library_owned.h
  kPool,        // a segment of CuPy's memory pool (asked for by CuPy's module)
};

// Survivors from this many different steps make a site "accumulating": one or two steps' worth
// alive at exit is what a loop normally holds (the last batch, the last step's outputs).
constexpr size_t kAccumulatingSteps = 3;

struct Survivors {
  uint64_t bytes = 0, count = 0, first_time = UINT64_MAX, first_step = UINT64_MAX;
  int32_t device = 0;
  bool mixed_devices = false;
  std::vector<uint64_t> steps;  // distinct steps, at most kAccumulatingSteps kept

  void add_step(uint64_t step) {
    if (steps.size() < kAccumulatingSteps && std::find(steps.begin(), steps.end(), step) == steps.end())
      steps.push_back(step);
  }
  void merge(const Survivors& o) {
    if (count == 0) device = o.device;
    else if (device != o.device || o.mixed_devices) mixed_devices = true;
    bytes += o.bytes;
    count += o.count;
    first_time = std::min(first_time, o.first_time);
    first_step = std::min(first_step, o.first_step);
    for (uint64_t s : o.steps) add_step(s);
  }
};

// Where the script asked for library memory: its innermost line (a Python line, else a native
// frame with a source line) outside CUDA, PyTorch and the libraries; "" when the stack has none.
std::string user_line(const std::vector<Frame>& stack) {
  for (const Frame& f : stack) {
    if (f.python) return f.file.empty() ? f.function : fmt::format("{}:{}", f.file, f.line);
    if (f.module == "grad_fn" || is_framework_frame(f) || is_library_frame(f)) continue;
    if (!f.file.empty() && f.line) return fmt::format("{}:{}", f.file, f.line);
  }
  return {};
}

}  // namespace

std::string site_id(const std::string& stack_key, Api api) {
  return fmt::format("{:012x}", fnv1a(fmt::format("{}#{}", stack_key, format::api_name(api))) >> 16);
}

std::string site_id_of(const std::string& stack_key, Api api, bool torch_block) {
  return site_id(torch_block ? stack_key + "#torch.alloc" : stack_key, api);
}

namespace {

// (stack, api, kind, torch, origin, region name, creating stack of VMM memory held by a mapping)
using RawKey = std::tuple<uint64_t, uint8_t, uint8_t, bool, Origin, std::string, uint64_t>;

// Why each survivor is alive, and the survivors summed by raw site and origin.
std::map<RawKey, Survivors> raw_survivors(const Replay& replay) {
  const bool has_steps = replay.summary().steps > 0;
  // With the caching allocator's own events in the trace, its segments (cudaMalloc, or cuMemCreate
  // with expandable segments) alive at the end are its cache; its tensor blocks are what leaks.
  const bool has_torch = replay.summary().torch.events > 0;
  const std::vector<Region>& regions = replay.regions().all();
  std::map<RawKey, Survivors> raw;
  for (const LiveAlloc& a : replay.live()) {
    Origin origin;
    std::string region;
    if (!is_memory_kind(a.kind)) origin = Origin::kAddress;
    else if (has_torch && !a.torch_block && (a.api == Api::kCudaMalloc || a.api == Api::kCuMemCreate))
      origin = Origin::kCached;
    else if (a.region != LiveAlloc::kNoRegion && a.region < regions.size()) {
      origin = regions[a.region].end_ns == UINT64_MAX ? Origin::kOpenRegion : Origin::kRegion;
      region = regions[a.region].name;
    } else if (!has_steps) origin = Origin::kNoSteps;
    else if (a.step == 0) origin = Origin::kBeforeStep;
    else origin = Origin::kAfterStep;
    Survivors one;
    one.bytes = a.size;
    one.count = 1;
    one.first_time = a.time_ns;
    one.first_step = a.step;
    one.device = a.device;
    one.add_step(a.step);
    raw[{a.stack_id, static_cast<uint8_t>(a.api), static_cast<uint8_t>(a.kind), a.torch_block,
         origin, std::move(region), a.created_stack_id}].merge(one);
  }
  return raw;
}

// CuPy's memory pool keeps every block its arrays free and hands it out again: its segments alive
// at exit are its cache, as PyTorch's are. (Without the pool's own events the trace cannot tell
// which of its blocks arrays still used; growth, measured on the segments, still finds arrays kept
// step after step.)
bool is_cupy_pool(StackView& stacks, uint64_t stack_id) {
  return is_cupy_module(stacks.asking_module(stack_id));
}

struct Merged {
  SiteGroup group;
  Survivors survivors;
  Origin origin;
  std::optional<LibraryOwner> library;
};

// Memory a library made for itself is the library's, whatever else would have judged it (steps,
// a region): only a caching allocator's segments and address space keep their own kinds.
bool library_can_own(Origin origin) {
  return origin != Origin::kCached && origin != Origin::kAddress;
}
using MergedKey = std::tuple<std::string, uint8_t, uint8_t, bool, Origin, std::string>;

// Raw sites merged by symbolized stack: different raw stacks can symbolize alike once the shim's
// frames are gone.
std::map<MergedKey, Merged> merge_by_stack(const std::map<RawKey, Survivors>& raw,
                                           StackView& stacks, uint64_t pid) {
  std::map<MergedKey, Merged> merged;
  for (const auto& [key, r] : raw) {
    const auto& [stack_id, api_v, kind_v, torch_block, raw_origin, raw_region, created] = key;
    std::optional<LibraryOwner> library;
    if (raw_origin != Origin::kCached) library = stacks.library_owner(stack_id);
    Origin origin = raw_origin;
    std::string region = raw_region;
    if (library && library_can_own(origin)) {
      origin = Origin::kLibrary;
      region.clear();
    } else if (library_can_own(origin) && is_cupy_pool(stacks, stack_id)) {
      origin = Origin::kPool;
      region.clear();
    }
    const std::vector<Frame>& frames = stacks.frames(stack_id);
    const std::string& skey = stacks.stable_key(stack_id);
    auto [it, inserted] = merged.try_emplace({skey, api_v, kind_v, torch_block, origin, region});
    Merged& m = it->second;
    if (inserted) {
      SiteGroup& g = m.group;
      g.api = static_cast<Api>(api_v);
      g.memory = static_cast<MemoryKind>(kind_v);
      g.torch_block = torch_block;
      g.id = site_id_of(skey, g.api, torch_block);
      g.pid = pid;
      g.stack = frames;
      g.region = region;
      if (library) {
        g.owner = std::string(library->id);
        g.owner_call = library->call;
      }
      m.origin = origin;
      m.library = library;
    }
    // Of several creating sites behind one mapping site, the first in raw order is named.
    if (created && m.group.created_stack.empty()) m.group.created_stack = stacks.frames(created);
    m.survivors.merge(r);
  }
  return merged;
}

struct Verdict {
  const char* kind;
  std::string reason;
};

// The verdict on a merged site of a trace whose process exited (End read): its kind and reason.
Verdict verdict_at_exit(const SiteGroup& g, Origin origin, const Survivors& s) {
  switch (origin) {
    case Origin::kAddress: return {"unreleased", "address space still mapped or reserved at exit"};
    case Origin::kCached: return {"cached", "segment held by PyTorch's caching allocator"};
    case Origin::kPool:
      return {"cached", "segment held by CuPy's memory pool: blocks freed by arrays stay in the pool "
                        "for reuse (cupy.get_default_memory_pool().free_all_blocks() returns them)"};
    case Origin::kRegion:
    case Origin::kOpenRegion:
      return {"leak", fmt::format("allocated inside expect_no_leak region '{}' and alive at its end",
                                  g.region)};
    case Origin::kNoSteps: return {"leak", "alive at exit in a trace without step markers"};
    case Origin::kBeforeStep: return {"retained", "allocated before the first step and alive at exit"};
    case Origin::kLibrary:  // judge() words it: it knows the library
    case Origin::kAfterStep: break;
  }
  if (s.steps.size() >= kAccumulatingSteps)
    return {"leak", fmt::format("alive at exit; allocated after step {} at a site whose survivors "
                                "accumulate step over step",
                                s.first_step)};
  return {"retained", fmt::format("alive at exit; allocated after step {}, but survivors of only {} "
                                  "step{} at this site: not accumulating",
                                  s.first_step, s.steps.size(), s.steps.size() == 1 ? "" : "s")};
}

// A trace without End stopped while the process still ran (killed, crashed): what was alive then
// may have been freed a moment later, so nothing is "leaked at exit". Only a closed
// expect_no_leak region still proves a leak: the buffer outlived the region's end.
Verdict verdict_at_trace_end(const SiteGroup& g, Origin origin, const Survivors& s) {
  constexpr const char* kWhy = "no End record: the process was killed, crashed or is still running";
  switch (origin) {
    case Origin::kAddress:
      return {"unreleased", fmt::format("address space still mapped or reserved when the trace ended ({})", kWhy)};
    case Origin::kCached:
    case Origin::kPool:
    case Origin::kRegion:
    case Origin::kLibrary:
      return verdict_at_exit(g, origin, s);
    case Origin::kOpenRegion:
      return {"alive", fmt::format("alive when the trace ended, inside expect_no_leak region '{}' "
                                   "that never closed ({})", g.region, kWhy)};
    case Origin::kBeforeStep:
      return {"retained", "allocated before the first step and alive when the trace ended"};
    case Origin::kNoSteps:
    case Origin::kAfterStep: break;
  }
  if (origin == Origin::kAfterStep && s.steps.size() < kAccumulatingSteps)
    return {"retained", fmt::format("alive when the trace ended; allocated after step {}, but survivors "
                                    "of only {} step{} at this site: not accumulating",
                                    s.first_step, s.steps.size(), s.steps.size() == 1 ? "" : "s")};
  return {"alive", fmt::format("alive when the trace ended ({}): not known to leak", kWhy)};
}

// The verdict; memory a library made for itself is "library", named by the library, what it is,
// the call that made it and the script's line that caused it.
void judge(SiteGroup& g, Origin origin, const Survivors& s, bool ended,
           const std::optional<LibraryOwner>& library) {
  if (origin == Origin::kLibrary && library) {
    const std::string line = user_line(g.stack);
    g.kind = "library";
    g.reason = fmt::format(
        "{}'s {}, made by {}{}: kept by the library for the life of the process, "
        "not the script's leak",
        library->library, library->what, library->call, line.empty() ? "" : " for " + line);
    return;
  }
  Verdict v = ended ? verdict_at_exit(g, origin, s) : verdict_at_trace_end(g, origin, s);
  g.kind = v.kind;
  g.reason = std::move(v.reason);
}

}  // namespace

// Groups surviving allocations by call site and origin: first by raw (stack id, api, kind), then
// merged by symbolized stack; the verdict for allocations after the first step is taken on the
// merged site.
void group_survivors(const LoadedTrace& trace, StackView& stacks, std::vector<SiteGroup>& leaks,
                     std::vector<SiteGroup>& address_space) {
  std::map<MergedKey, Merged> merged =
      merge_by_stack(raw_survivors(trace.replay), stacks, trace.process.pid);
  for (auto& [key, m] : merged) {
    SiteGroup& g = m.group;
    const Survivors& s = m.survivors;
    g.bytes = s.bytes;
    g.count = s.count;
    g.device = s.mixed_devices ? -1 : s.device;
    g.first_time_ns = s.first_time;
    judge(g, m.origin, s, trace.integrity.ended, m.library);
    if (m.origin == Origin::kAddress) address_space.push_back(std::move(g));
    else leaks.push_back(std::move(g));
  }
  std::sort(leaks.begin(), leaks.end(), by_bytes_desc);
  std::sort(address_space.begin(), address_space.end(), by_bytes_desc);
}

}  // namespace gpumemshim::analyzer

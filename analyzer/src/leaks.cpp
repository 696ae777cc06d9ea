// Findings on the survivors of one process: leaks (DESIGN §8 (c): no step markers → everything of a
// memory kind alive at the end) and unreleased address space.
#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "gpumemshim/analyzer/analysis.h"
#include "gpumemshim/analyzer/stack_view.h"

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
  return a.id < b.id;
}

}  // namespace

std::string site_id(const std::string& stack_key, Api api) {
  return fmt::format("{:012x}", fnv1a(fmt::format("{}#{}", stack_key, format::api_name(api))) >> 16);
}

// Groups surviving allocations by call site: first by raw (stack id, api, kind), then merged by
// symbolized stack (different raw stacks can symbolize alike once the shim's frames are gone).
void group_survivors(const LoadedTrace& trace, StackView& stacks, std::vector<SiteGroup>& leaks,
                     std::vector<SiteGroup>& address_space) {
  struct Raw {
    uint64_t bytes = 0, count = 0, first_time = UINT64_MAX;
    int32_t device = 0;
    bool mixed_devices = false;
  };
  std::map<std::tuple<uint64_t, uint8_t, uint8_t, bool>, Raw> raw;  // (stack, api, kind, torch)
  for (const LiveAlloc& a : trace.replay.live()) {
    Raw& r = raw[{a.stack_id, static_cast<uint8_t>(a.api), static_cast<uint8_t>(a.kind), a.torch_block}];
    if (r.count == 0) r.device = a.device;
    else if (r.device != a.device) r.mixed_devices = true;
    r.bytes += a.size;
    ++r.count;
    r.first_time = std::min(r.first_time, a.time_ns);
  }
  std::map<std::tuple<std::string, uint8_t, uint8_t, bool>, SiteGroup> merged;
  for (const auto& [key, r] : raw) {
    auto [stack_id, api_v, kind_v, torch_block] = key;
    const std::vector<Frame>& frames = stacks.frames(stack_id);
    std::string skey = StackView::stable_key(frames);
    auto [it, inserted] = merged.try_emplace({skey, api_v, kind_v, torch_block});
    SiteGroup& g = it->second;
    int32_t device = r.mixed_devices ? -1 : r.device;
    if (inserted) {
      g.api = static_cast<Api>(api_v);
      g.memory = static_cast<MemoryKind>(kind_v);
      g.kind = is_memory_kind(g.memory) ? "leak" : "unreleased";
      g.torch_block = torch_block;
      g.id = site_id(torch_block ? skey + "#torch.alloc" : skey, g.api);
      g.device = device;
      g.pid = trace.process.pid;
      g.first_time_ns = r.first_time;
      g.stack = frames;
    } else {
      if (g.device != device) g.device = -1;
      g.first_time_ns = std::min(g.first_time_ns, r.first_time);
    }
    g.bytes += r.bytes;
    g.count += r.count;
  }
  for (auto& [key, g] : merged) {
    if (is_memory_kind(g.memory)) leaks.push_back(std::move(g));
    else address_space.push_back(std::move(g));
  }
  std::sort(leaks.begin(), leaks.end(), by_bytes_desc);
  std::sort(address_space.begin(), address_space.end(), by_bytes_desc);
}

}  // namespace gpumemshim::analyzer

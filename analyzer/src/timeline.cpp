// One walk of a trace's events gives each site's peak (to pick the top sites) and the peak moment;
// a second walk samples: per time bucket the lowest and the highest point, so a downsampled chart
// still shows the true peak and the troughs between steps.
#include "gpumemshim/analyzer/timeline.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "gpumemshim/analyzer/address_key.h"
#include "gpumemshim/analyzer/flat_map.h"
#include "gpumemshim/analyzer/stack_view.h"

namespace gpumemshim::analyzer {

// leaks.cpp: the site id of a symbolized stack and api (the same hashing as the leak report).
std::string site_id(const std::string& stack_key, Api api);

using nlohmann::json;

namespace {

constexpr size_t kPeakSites = 20;

std::string_view base_name(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Live device memory, by site, plus the caching allocator's reserved and allocated bytes.
class MemoryState {
 public:
  MemoryState(const LoadedTrace& trace, StackView& stacks, std::vector<TimelineSite>& sites)
      : trace_(trace), stacks_(stacks), sites_(sites) {}

  // Returns true when the event changed any byte count.
  bool apply(const TimedEvent& e) {
    switch (e.index()) {
      case 0: return alloc(std::get<0>(e));
      case 1: return free(std::get<1>(e));
      case 5: return torch(std::get<5>(e));
      default: return false;
    }
  }

  uint64_t live = 0;
  uint64_t reserved = 0;
  uint64_t allocated = 0;
  std::vector<uint64_t> site_live;
  // When set (the second walk): site -> index among the top sites (-1: not one), and those sites'
  // live bytes kept up to date, so a sample costs only the top sites.
  const std::vector<int>* top_of = nullptr;
  std::vector<uint64_t> top_live;

 private:
  struct Live {
    uint64_t size = 0;
    uint32_t site = 0;
  };

  uint32_t site_of(uint64_t stack_id, Api api) {
    uint64_t raw_key = stack_id * 64 + static_cast<uint8_t>(api);
    if (const uint32_t* known = raw_sites_.find(raw_key)) return *known;
    const std::vector<Frame>& frames = stacks_.frames(stack_id);
    std::string id = site_id(StackView::stable_key(frames), api);
    uint32_t index;
    if (auto it = by_id_.find(id); it != by_id_.end()) {
      index = it->second;
    } else {
      index = static_cast<uint32_t>(sites_.size());
      sites_.push_back(TimelineSite{id, frame_label(frames), frames, 0});
      site_live.push_back(0);
      by_id_.emplace(id, index);
    }
    *raw_sites_.try_emplace(raw_key).first = index;
    return index;
  }

  bool alloc(const format::AllocRecord& r) {
    if (!is_device_memory_kind(r.kind)) return false;
    AddressKey key{r.address, address_class(r.kind)};
    if (const Live* old = live_.find(key)) remove(key, *old);  // its free was missed
    uint32_t site = site_of(r.stack_id, r.api);
    *live_.try_emplace(key).first = Live{r.size, site};
    live += r.size;
    site_live[site] += r.size;
    if (top_of && (*top_of)[site] >= 0) top_live[static_cast<size_t>((*top_of)[site])] += r.size;
    sites_[site].peak_bytes = std::max(sites_[site].peak_bytes, site_live[site]);
    return true;
  }

  bool free(const format::FreeRecord& r) {
    if (r.address == 0 || r.result != 0) return false;
    const AddressKey key{r.address, address_class(r.kind)};
    const Live* a = live_.find(key);
    if (!a) return false;
    remove(key, *a);
    return true;
  }

  void remove(const AddressKey& key, const Live& a) {  // a: the live entry of key
    live -= a.size;
    site_live[a.site] -= a.size;
    if (top_of && (*top_of)[a.site] >= 0) top_live[static_cast<size_t>((*top_of)[a.site])] -= a.size;
    live_.erase(key);  // last: a is the map's slot
  }

  bool torch(const format::TorchEventRecord& r) {
    auto sub = [](uint64_t& v, uint64_t d) { v = v > d ? v - d : 0; };
    switch (r.action) {
      case format::TorchAction::kAlloc: {
        auto [it, inserted] = blocks_.try_emplace(r.address, r.size);
        if (!inserted) {
          sub(allocated, it->second);
          it->second = r.size;
        }
        allocated += r.size;
        return true;
      }
      case format::TorchAction::kFreeCompleted:
        if (auto it = blocks_.find(r.address); it != blocks_.end()) {
          sub(allocated, it->second);
          blocks_.erase(it);
        }
        return true;
      case format::TorchAction::kSegmentAlloc:
      case format::TorchAction::kSegmentMap: reserved += r.size; return true;
      case format::TorchAction::kSegmentFree:
      case format::TorchAction::kSegmentUnmap: sub(reserved, r.size); return true;
      default: return false;
    }
  }

  const LoadedTrace& trace_;
  StackView& stacks_;
  std::vector<TimelineSite>& sites_;
  struct RawKeyHash {
    size_t operator()(uint64_t k) const noexcept { return static_cast<size_t>(k); }
  };
  FlatMap<uint64_t, uint32_t, RawKeyHash> raw_sites_;  // stack id * 64 + api -> site
  std::unordered_map<std::string, uint32_t> by_id_;
  FlatMap<AddressKey, Live, AddressKeyHash> live_;
  std::unordered_map<uint64_t, uint64_t> blocks_;  // tensor blocks: address -> size
};

// Sites whose innermost frames read alike (one allocation helper called from several places) get
// the first caller frame that tells them apart: "util.py:19 malloc ← model.py:27 load_weights".
void disambiguate_labels(std::vector<TimelineSite>& sites) {
  std::unordered_map<std::string, std::vector<size_t>> by_label;
  for (size_t i = 0; i < sites.size(); ++i) by_label[sites[i].label].push_back(i);
  for (auto& [label, members] : by_label) {
    if (members.size() < 2) continue;
    for (size_t i : members) {
      const std::vector<Frame>& st = sites[i].stack;
      for (size_t depth = 1; depth < st.size(); ++depth) {
        std::string caller = frame_label(std::vector<Frame>{st[depth]});
        bool shared = std::all_of(members.begin(), members.end(), [&](size_t j) {
          return j == i || (sites[j].stack.size() > depth &&
                            frame_label(std::vector<Frame>{sites[j].stack[depth]}) == caller);
        });
        if (!shared) {
          sites[i].label = label + " \u2190 " + caller;
          break;
        }
      }
    }
  }
}

}  // namespace

std::string frame_label(const std::vector<Frame>& stack) {
  if (stack.empty()) return "(no stack recorded)";
  const Frame& f = stack.front();
  std::string fn = f.function.empty() ? fmt::format("{:#x}", f.pc) : f.function;
  if (!f.file.empty())
    return f.line ? fmt::format("{}:{} {}", base_name(f.file), f.line, fn)
                  : fmt::format("{} {}", base_name(f.file), fn);
  if (!f.module.empty()) return fmt::format("{} ({})", fn, base_name(f.module));
  return fn;
}

json frames_to_json(const std::vector<Frame>& frames) {
  json a = json::array();
  for (const Frame& f : frames)
    a.push_back({{"function", f.function}, {"file", f.file}, {"line", f.line},
                 {"module", f.module}, {"python", f.python}, {"inlined", f.inlined},
                 {"pc", fmt::format("{:#x}", f.pc)}});
  return a;
}

namespace {

// Walks every timed event in time order; false: it could not (the walk stopped part-way).
using EventWalk = std::function<bool(const std::function<void(const TimedEvent&)>&)>;

std::optional<Timeline> build_timeline_from(const LoadedTrace& trace, const EventWalk& walk,
                                            size_t max_samples, size_t top_sites) {
  Timeline tl;
  StackView stacks(trace);
  uint64_t end_ns = static_cast<uint64_t>(trace.duration_s() * 1e9);

  // Walk 1: sites and their peaks, the peak moment, steps.
  size_t peak_index = SIZE_MAX;
  {
    MemoryState state(trace, stacks, tl.all_sites);
    size_t i = 0;
    bool walked = walk([&](const TimedEvent& e) {
      end_ns = std::max(end_ns, event_time_ns(e));
      if (e.index() == 5) tl.has_torch = true;
      if (e.index() == 4) {
        const auto& m = std::get<4>(e);
        if (m.kind == format::MarkerKind::kStep && tl.steps_ns.size() < kMaxTimelineSteps)
          tl.steps_ns.push_back(m.time_ns);
      }
      if (state.apply(e) && state.live > tl.peak_bytes) {
        tl.peak_bytes = state.live;
        tl.peak_time_ns = event_time_ns(e);
        peak_index = i;
      }
      ++i;
    });
    if (!walked) return std::nullopt;
  }
  disambiguate_labels(tl.all_sites);
  std::vector<size_t> order(tl.all_sites.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tl.all_sites[a].peak_bytes > tl.all_sites[b].peak_bytes;
  });
  std::vector<int> top_of(tl.all_sites.size(), -1);  // site -> its index among the top sites
  for (size_t i = 0; i < order.size() && tl.sites.size() < top_sites; ++i) {
    if (tl.all_sites[order[i]].peak_bytes == 0) break;
    top_of[order[i]] = static_cast<int>(tl.sites.size());
    tl.sites.push_back(tl.all_sites[order[i]]);
  }

  // Walk 2: the samples.
  std::vector<TimelineSite> again;  // the same sites, found in the same order
  MemoryState state(trace, stacks, again);
  state.top_of = &top_of;
  state.top_live.assign(tl.sites.size(), 0);
  auto snapshot_into = [&](TimelineSample& s, uint64_t t) {
    s.time_ns = t;
    s.live_bytes = state.live;
    s.reserved_bytes = state.reserved;
    s.allocated_bytes = state.allocated;
    s.sites.assign(state.top_live.begin(), state.top_live.end());
    uint64_t top_sum = 0;
    for (uint64_t v : state.top_live) top_sum += v;
    s.sites.push_back(state.live - top_sum);  // "other"
  };
  auto snapshot = [&](uint64_t t) {
    TimelineSample s;
    snapshot_into(s, t);
    return s;
  };
  const size_t buckets = std::max<size_t>(1, max_samples / 2 - 1);
  const uint64_t span = std::max<uint64_t>(end_ns, 1);
  auto bucket_of = [&](uint64_t t) {
    return std::min<size_t>(buckets - 1, static_cast<size_t>(static_cast<double>(t) / static_cast<double>(span) *
                                                            static_cast<double>(buckets)));
  };
  struct Extreme {
    bool set = false;
    size_t seq = 0;
    TimelineSample sample;
  };
  Extreme lo, hi;
  size_t bucket = SIZE_MAX;
  auto flush = [&] {
    if (!lo.set) return;
    if (lo.seq == hi.seq) {
      tl.samples.push_back(std::move(lo.sample));
    } else if (lo.seq < hi.seq) {
      tl.samples.push_back(std::move(lo.sample));
      tl.samples.push_back(std::move(hi.sample));
    } else {
      tl.samples.push_back(std::move(hi.sample));
      tl.samples.push_back(std::move(lo.sample));
    }
    lo = Extreme{};
    hi = Extreme{};
  };
  size_t i = 0;
  bool walked = walk([&](const TimedEvent& e) {
    const size_t seq = i++;
    if (!state.apply(e)) return;
    uint64_t t = event_time_ns(e);
    if (tl.samples.empty() && !lo.set && t > 0)  // nothing was alive before the first event
      tl.samples.push_back(TimelineSample{0, 0, 0, 0, std::vector<uint64_t>(tl.sites.size() + 1, 0)});
    if (seq == peak_index) {
      for (size_t s = 0; s < state.site_live.size(); ++s)
        if (state.site_live[s]) tl.at_peak.push_back(PeakSite{s, state.site_live[s]});
      std::stable_sort(tl.at_peak.begin(), tl.at_peak.end(),
                       [](const PeakSite& a, const PeakSite& b) { return a.bytes > b.bytes; });
    }
    size_t b = bucket_of(t);
    if (b != bucket) {
      flush();
      bucket = b;
    }
    auto key = std::pair{state.live, state.allocated};
    for (Extreme* x : {&lo, &hi}) {
      auto x_key = std::pair{x->sample.live_bytes, x->sample.allocated_bytes};
      if (x->set && (x == &lo ? !(key < x_key) : !(key > x_key))) continue;
      x->set = true;
      x->seq = seq;
      snapshot_into(x->sample, t);  // reuses the sample's storage
    }
  });
  if (!walked) return std::nullopt;
  flush();
  if (!tl.samples.empty() && tl.samples.back().time_ns < end_ns) tl.samples.push_back(snapshot(end_ns));
  return tl;
}

}  // namespace

Timeline build_timeline(const LoadedTrace& trace, const std::vector<TimedEvent>& events,
                        size_t max_samples, size_t top_sites) {
  EventWalk walk = [&](const std::function<void(const TimedEvent&)>& visit) {
    for (const TimedEvent& e : events) visit(e);
    return true;
  };
  return *build_timeline_from(trace, walk, max_samples, top_sites);
}

Timeline build_timeline(const LoadedTrace& trace, const std::string& path, size_t max_samples,
                        size_t top_sites) {
  // Two walks, each a streamed read of the file (no event vector); a file too far out of time
  // order for streaming is read once into memory instead.
  EventWalk walk = [&](const std::function<void(const TimedEvent&)>& visit) {
    return stream_trace_events(path, visit);
  };
  if (std::optional<Timeline> tl = build_timeline_from(trace, walk, max_samples, top_sites)) return std::move(*tl);
  TraceEvents events = read_trace_events(path);
  return build_timeline(trace, events.events, max_samples, top_sites);
}

json timeline_json(const Timeline& tl) {
  json sites = json::array();
  for (const TimelineSite& s : tl.sites)
    sites.push_back({{"id", s.id}, {"label", s.label}, {"peak_bytes", s.peak_bytes},
                     {"stack", frames_to_json(s.stack)}});
  json samples = json::array();
  for (const TimelineSample& s : tl.samples) {
    json by_site = json::object();
    for (size_t i = 0; i < tl.sites.size(); ++i)
      if (s.sites[i]) by_site[tl.sites[i].id] = s.sites[i];
    if (s.sites.back()) by_site["other"] = s.sites.back();
    json o = {{"t_s", static_cast<double>(s.time_ns) / 1e9}, {"live_bytes", s.live_bytes}};
    if (tl.has_torch) {
      o["reserved_bytes"] = s.reserved_bytes;
      o["allocated_bytes"] = s.allocated_bytes;
    }
    o["sites"] = std::move(by_site);
    samples.push_back(std::move(o));
  }
  json steps = json::array();
  for (uint64_t t : tl.steps_ns) steps.push_back(static_cast<double>(t) / 1e9);
  json at_peak = json::array();
  for (const PeakSite& p : tl.at_peak) {
    if (at_peak.size() == kPeakSites) break;
    const TimelineSite& s = tl.all_sites[p.site];
    at_peak.push_back({{"id", s.id}, {"label", s.label}, {"bytes", p.bytes}, {"stack", frames_to_json(s.stack)}});
  }
  return {{"samples", std::move(samples)},
          {"sites", std::move(sites)},
          {"steps", std::move(steps)},
          {"peak", {{"t_s", static_cast<double>(tl.peak_time_ns) / 1e9},
                    {"live_bytes", tl.peak_bytes},
                    {"sites", std::move(at_peak)}}}};
}

void add_timelines(json& report, const std::vector<std::string>& paths) {
  json& processes = report["processes"];
  for (size_t i = 0; i < paths.size() && i < processes.size(); ++i) {
    LoadedTrace trace = load_trace(paths[i]);
    processes[i]["timeline"] = timeline_json(build_timeline(trace, paths[i]));
  }
}

}  // namespace gpumemshim::analyzer

// The timeline of a loaded trace: its replay sampled memory over time per raw site
// (timeline_samples.h) and kept each site's peak; here raw sites become call sites (symbolized
// stacks, the leak report's site ids), the top ones are picked by their own peak, and the samples
// are summed per top site. A call site made of several raw stacks needs its sum's peak, which only
// a replay that knows the grouping can give: the trace is then read once more.
#include "findings/timeline.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "findings/leaks.h"
#include "gpumemshim/analyzer/units.h"
#include "report/stack_view.h"

namespace gpumemshim::analyzer {


namespace {

std::string_view base_name(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

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
  std::string fn = f.function.empty() ? pc_hex(f.pc) : f.function;
  if (!f.file.empty())
    return f.line ? fmt::format("{}:{} {}", base_name(f.file), f.line, fn)
                  : fmt::format("{} {}", base_name(f.file), fn);
  if (!f.module.empty()) return fmt::format("{} ({})", fn, base_name(f.module));
  return fn;
}

namespace {

// Raw timeline sites -> call sites (in first-seen order), with their labels and stacks.
struct CallSites {
  std::vector<TimelineSite> sites;
  std::vector<uint32_t> of_raw;  // raw site -> index in sites (UINT32_MAX: not a timeline site)
  bool grouped = false;          // some call site has several raw sites
};

CallSites call_sites(const LoadedTrace& trace, StackView& stacks) {
  CallSites cs;
  const Replay& replay = trace.replay;
  std::unordered_map<std::string, uint32_t> by_id;
  cs.of_raw.assign(replay.sites().size(), UINT32_MAX);
  for (uint32_t raw = 0; raw < replay.sites().size(); ++raw) {
    if (!replay.is_timeline_site(raw)) continue;
    const RawSite& r = replay.sites()[raw];
    const std::vector<Frame>& frames = stacks.frames(r.stack_id);
    std::string id = site_id(stacks.stable_key(r.stack_id), r.api);
    auto [it, inserted] = by_id.try_emplace(id, static_cast<uint32_t>(cs.sites.size()));
    if (inserted) cs.sites.push_back(TimelineSite{id, frame_label(frames), frames, 0});
    else cs.grouped = true;
    cs.of_raw[raw] = it->second;
  }
  return cs;
}

// Each call site's own peak: its raw site's, or (grouped) the sum's: from the replay's log of site
// changes when it is complete, else from a second replay that tracks the groups.
void set_site_peaks(const LoadedTrace& trace, CallSites& cs) {
  if (!cs.grouped) {
    for (uint32_t raw = 0; raw < cs.of_raw.size(); ++raw)
      if (cs.of_raw[raw] != UINT32_MAX) cs.sites[cs.of_raw[raw]].peak_bytes = trace.replay.site_peak(raw);
    return;
  }
  std::vector<uint64_t> peaks;
  if (trace.replay.timeline().site_log_complete()) peaks = trace.replay.timeline().group_peaks_from_log(cs.of_raw);
  else peaks = load_trace(trace.path, cs.of_raw).replay.timeline().group_peaks();
  for (size_t i = 0; i < cs.sites.size() && i < peaks.size(); ++i) cs.sites[i].peak_bytes = peaks[i];
}

// The top sites by their own peak; top_of: each call site's index among them (-1: none).
std::vector<int> pick_top_sites(Timeline& tl, size_t top_sites) {
  std::vector<size_t> order(tl.all_sites.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tl.all_sites[a].peak_bytes > tl.all_sites[b].peak_bytes;
  });
  std::vector<int> top_of(tl.all_sites.size(), -1);
  for (size_t i = 0; i < order.size() && tl.sites.size() < top_sites; ++i) {
    if (tl.all_sites[order[i]].peak_bytes == 0) break;
    top_of[order[i]] = static_cast<int>(tl.sites.size());
    tl.sites.push_back(tl.all_sites[order[i]]);
  }
  return top_of;
}

// What each call site held at the device peak, bytes descending.
void add_peak_breakdown(Timeline& tl, const Replay& replay, const std::vector<uint32_t>& of_raw) {
  const PeakSiteTracker& peak_sites = replay.peaks().sites();
  if (!peak_sites.has_peak() || tl.peak_bytes == 0) return;
  std::vector<uint64_t> at_peak(tl.all_sites.size(), 0);
  std::vector<uint64_t> raw_at_peak = peak_sites.at_peak(replay.site_live());
  for (uint32_t raw = 0; raw < raw_at_peak.size() && raw < of_raw.size(); ++raw)
    if (of_raw[raw] != UINT32_MAX) at_peak[of_raw[raw]] += raw_at_peak[raw];
  for (size_t s = 0; s < at_peak.size(); ++s)
    if (at_peak[s]) tl.at_peak.push_back(PeakSite{s, at_peak[s]});
  std::stable_sort(tl.at_peak.begin(), tl.at_peak.end(),
                   [](const PeakSite& a, const PeakSite& b) { return a.bytes > b.bytes; });
}

// The samples: buckets merged pairwise until they fit, each giving its low and high in time order,
// summed per top site (top_index(raw site): its index among them, -1: none), then the end.
template <typename TopIndex>
void add_samples(Timeline& tl, const LoadedTrace& trace, size_t max_samples, TopIndex top_index) {
  const Replay& replay = trace.replay;
  // Read in place: a bucket holds every site's bytes twice (~100 MB for a long run of 3000 sites),
  // copied only when they must be merged further.
  const size_t max_buckets = std::max<size_t>(1, max_samples / 2 - 1);
  std::vector<SampledBucket> merged;
  const std::vector<SampledBucket>* kept = &replay.timeline().samples().buckets();
  if (kept->size() > max_buckets) {
    merged = *kept;
    while (merged.size() > max_buckets) halve_buckets(merged);
    kept = &merged;
  }
  const std::vector<SampledBucket>& buckets = *kept;
  auto sample = [&](uint64_t time_ns, uint64_t live, uint64_t reserved, uint64_t allocated,
                    const auto& for_each_site) {
    TimelineSample s{time_ns, live, reserved, allocated, std::vector<uint64_t>(tl.sites.size() + 1, 0)};
    uint64_t top_sum = 0;
    for_each_site([&](uint32_t raw, uint64_t bytes) {
      if (int k = top_index(raw); k >= 0) {
        s.sites[static_cast<size_t>(k)] += bytes;
        top_sum += bytes;
      }
    });
    s.sites.back() = live > top_sum ? live - top_sum : 0;  // "other"
    tl.samples.push_back(std::move(s));
  };
  auto add_point = [&](const SampledPoint& p) {
    sample(p.time_ns, p.live_bytes, p.reserved_bytes, p.allocated_bytes,
           [&](const auto& f) { p.for_each_site(f); });
  };
  if (!buckets.empty() && std::min(buckets[0].low.time_ns, buckets[0].high.time_ns) > 0)
    tl.samples.push_back(TimelineSample{0, 0, 0, 0, std::vector<uint64_t>(tl.sites.size() + 1, 0)});
  for (const SampledBucket& b : buckets) {
    if (b.same()) {
      add_point(b.low);
    } else {
      const SampledPoint& first = b.low.seq < b.high.seq ? b.low : b.high;
      add_point(first);
      add_point(&first == &b.low ? b.high : b.low);
    }
  }
  // In integer nanoseconds: duration_s() * 1e9 can round past the end, or past 2^64.
  uint64_t end_ns = std::max(trace.end_ns(), replay.last_time_ns());
  if (!tl.samples.empty() && tl.samples.back().time_ns < end_ns) {
    const std::vector<uint64_t>& live_now = replay.site_live();
    sample(end_ns, replay.live_device_bytes(), replay.devices().reserved_bytes(), replay.devices().allocated_bytes(),
           [&](const auto& f) {
             for (uint32_t raw = 0; raw < live_now.size(); ++raw)
               if (replay.is_timeline_site(raw) && live_now[raw]) f(raw, live_now[raw]);
           });
  }
}

}  // namespace

Timeline build_timeline(const LoadedTrace& trace, size_t max_samples, size_t top_sites,
                        StackView* shared_stacks) {
  Timeline tl;
  const Replay& replay = trace.replay;
  std::optional<StackView> own_stacks;
  if (shared_stacks == nullptr || shared_stacks->max_frames() != kMaxOutputFrames)
    shared_stacks = &own_stacks.emplace(trace);
  CallSites cs = call_sites(trace, *shared_stacks);
  set_site_peaks(trace, cs);
  tl.all_sites = std::move(cs.sites);
  disambiguate_labels(tl.all_sites);
  const std::vector<int> top_of = pick_top_sites(tl, top_sites);
  tl.has_torch = replay.summary().torch.events > 0;
  tl.steps_ns = replay.growth_samples().step_times();  // already the first kMaxTimelineSteps
  tl.peak_bytes = replay.summary().peak_bytes;
  tl.peak_time_ns = replay.peaks().time_ns();
  add_peak_breakdown(tl, replay, cs.of_raw);
  add_samples(tl, trace, max_samples, [&](uint32_t raw) {
    return raw < cs.of_raw.size() && cs.of_raw[raw] != UINT32_MAX ? top_of[cs.of_raw[raw]] : -1;
  });
  return tl;
}

}  // namespace gpumemshim::analyzer

// Text report, in the spirit of LeakSanitizer / heaptrack: greppable lines, exact bytes.
#include <fmt/format.h>

#include "gpumemshim/analyzer/render.h"
#include "gpumemshim/analyzer/units.h"
#include "render/accounting_render.h"
#include "render/frameworks_render.h"
#include "render/libraries_render.h"
#include "render/sites.h"
#include "report/integrity.h"

namespace gpumemshim::analyzer {

namespace {

std::string bytes_str(uint64_t b) {
  return b < 1024 ? fmt::format("{} bytes", b) : fmt::format("{} ({} bytes)", human_bytes(b), b);
}

void frames_text(std::string& out, const std::vector<Frame>& frames) {
  if (frames.empty()) {
    out += "  (no stack recorded)\n";
    return;
  }
  for (size_t i = 0; i < frames.size(); ++i) {
    const Frame& f = frames[i];
    std::string where;
    if (!f.file.empty()) where = f.line ? fmt::format(" at {}:{}", f.file, f.line) : fmt::format(" at {}", f.file);
    std::string fn = function_or_pc(f);
    std::string mod = f.module.empty() ? "" : fmt::format(" ({}+{:#x})", f.module, f.module_offset);
    if (!f.file.empty() && !f.module.empty()) mod = fmt::format(" ({})", f.module);
    out += fmt::format("  #{} {}{}{}{}\n", i, fn, where, mod, f.inlined ? " [inlined]" : "");
  }
}

std::string device_str(int32_t device) {
  return device < 0 ? "several devices" : fmt::format("device {}", device);
}

void growth_text(std::string& out, const Growth& g) {
  const bool steps = g.basis == "steps";
  std::string projection;
  if (g.has_projection)
    projection =
        fmt::format(", device full at {} {}", steps ? "step" : "window", g.projected_oom_step);
  out += fmt::format(
      "{} +{} per {} over {} {} (warm-up {}, confidence {:.2f}): {} -> {}{} via {} pid {} id "
      "{}{}\n",
      g.suppressed ? "SUPPRESSED GROWTH" : "GROWTH",
      bytes_str(static_cast<uint64_t>(g.bytes_per_step)), g.unit, g.steps,
      steps ? "steps" : "windows", g.warmup_steps, g.confidence, bytes_str(g.first_live_bytes),
      bytes_str(g.last_live_bytes), projection, api_label(g.torch_block, g.api), g.pid, g.id,
      g.suppressed ? fmt::format(" (suppressed by '{}')", g.suppressed_by) : "");
  const std::string cause = growth_cause(g);
  if (!cause.empty()) out += fmt::format("  cause: {}\n", cause);
  frames_text(out, g.stack);
  out += "\n";
}

// "parameters 1.0 GiB, gradients 1.0 GiB, ..." for the categories that hold anything.
std::string categories_line(const CategoryBytes& c, bool tagged) {
  std::string out;
  for (size_t k = 0; k < kMemoryCategoryCount; ++k) {
    if (c.bytes[k] == 0) continue;
    const auto category = static_cast<MemoryCategory>(k);
    const std::string label = tagged || category != MemoryCategory::kTemporary
                                  ? category_label(category)
                                  : "tensor blocks (not told apart)";
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", label, human_bytes(c.bytes[k]));
  }
  if (out.empty()) out = "nothing";
  if (c.has_not_explained && c.not_explained)
    out += fmt::format("; not explained by the trace (device used, cudaMemGetInfo) {}",
                       human_bytes(c.not_explained));
  return out;
}

const CategoryOom* category_oom(const MemoryCategories* m, int32_t device, uint64_t time_ns) {
  if (!m) return nullptr;
  for (const CategoryOom& o : m->ooms)
    if (o.device == device && o.at.time_ns == time_ns) return &o;
  return nullptr;
}

void categories_text(std::string& out, const MemoryCategories& m) {
  out += fmt::format("   memory by category at the peak ({} at {:.3f} s): {}\n",
                     human_bytes(m.peak.total()), static_cast<double>(m.peak.time_ns) / 1e9,
                     categories_line(m.peak, m.tagged));
  if (!m.tagged)
    out +=
        "     (no tags or marked backward passes in the trace: the Python package's categories "
        "were "
        "off, GPUMEMSHIM_CATEGORIES=0, or the bridge was attached by hand)\n";
  for (MemoryCategory c : {MemoryCategory::kActivation, MemoryCategory::kTemporary}) {
    for (const CategorySite& site : m.peak_sites) {
      if (site.category != c) continue;
      out += fmt::format("     largest {} at the peak: {} at {}\n", category_label(c),
                         human_bytes(site.bytes), site_label(site.stack));
      break;
    }
  }
}

void fragmentation_text(std::string& out, const DeviceFragmentation& d,
                        const MemoryCategories* categories) {
  out += fmt::format("FRAGMENTATION pid {} device {}:", d.pid, d.device);
  if (d.torch)
    out += fmt::format(" reserved peak {} ({} allocated then), max reserved-allocated {}, at {} {} inactive "
                       "split blocks ({}), largest free block {}",
                       bytes_str(d.reserved_peak), bytes_str(d.allocated_at_reserved_peak),
                       bytes_str(d.max_reserved_minus_allocated), d.snapshot == "oom" ? "the OOM" : "the end",
                       d.inactive_split_blocks, bytes_str(d.inactive_split_bytes), bytes_str(d.largest_free_block));
  else
    out += " no caching-allocator events";
  if (d.has_untracked) out += fmt::format(", untracked (cudaMemGetInfo) {}", bytes_str(d.untracked));
  if (d.limit_bytes)
    out += d.memory_fraction > 0 ? fmt::format(", capped at {} (memory fraction {:.3g})",
                                               bytes_str(d.limit_bytes), d.memory_fraction)
                                 : fmt::format(", capped at {}", bytes_str(d.limit_bytes));
  out += "\n";
  for (const OomFinding& o : d.ooms) {
    out += fmt::format(
        "  OOM at {:.6f} s asking {}{}{}: {}{}\n", static_cast<double>(o.time_ns) / 1e9,
        bytes_str(o.requested),
        o.torch ? fmt::format(", reserved {}, allocated {}, largest free block {}",
                              bytes_str(o.reserved), bytes_str(o.allocated),
                              bytes_str(o.largest_free_block))
                : "",
        o.has_device_free ? fmt::format(", device free {}", bytes_str(o.device_free)) : "",
        o.verdict, o.suppressed ? fmt::format(" (suppressed by '{}')", o.suppressed_by) : "");
    if (const CategoryOom* c = category_oom(categories, d.device, o.time_ns))
      out += fmt::format("    by category: {}\n", categories_line(c->at, categories->tagged));
  }
  out += "\n";
}

void group_text(std::string& out, const SiteGroup& g, const char* label) {
  out += fmt::format("{} {} in {} allocation{} via {} [{}, {}] pid {} id {}{}\n", label,
                     bytes_str(g.bytes), g.count, g.count == 1 ? "" : "s",
                     api_label(g.torch_block, g.api), memory_label(g.torch_block, g.memory),
                     device_str(g.device), g.pid, g.id + (g.owner.empty() ? "" : " owner " + g.owner),
                     g.suppressed ? fmt::format(" (suppressed by '{}')", g.suppressed_by) : "");
  if (!g.reason.empty()) out += fmt::format("  ({})\n", g.reason);
  frames_text(out, g.stack);
  if (!g.created_stack.empty()) {
    out += "  created by cuMemCreate at:\n";
    frames_text(out, g.created_stack);
  }
  out += "\n";
}

void summary_text(std::string& out, const Summary& s, const char* indent) {
  out += fmt::format("{}allocations:        {}\n", indent, s.allocations);
  out += fmt::format("{}frees:              {}\n", indent, s.frees);
  out += fmt::format("{}failed allocations: {}\n", indent, s.failed_allocations);
  if (s.failed_frees) out += fmt::format("{}failed frees:       {}\n", indent, s.failed_frees);
  out += fmt::format("{}unmatched frees:    {}\n", indent, s.unmatched_frees);
  if (s.retained_bytes) out += fmt::format("{}retained:           {}\n", indent, bytes_str(s.retained_bytes));
  if (s.cached_bytes) out += fmt::format("{}cached:             {}\n", indent, bytes_str(s.cached_bytes));
  if (s.library_allocations)
    out += fmt::format("{}library (not leaks): {} in {}\n", indent, bytes_str(s.library_bytes),
                       plural(s.library_allocations, "allocation"));
  if (s.alive_at_trace_end_allocations)
    out += fmt::format("{}alive when the trace ended (not leaks): {} in {}\n", indent,
                       bytes_str(s.alive_at_trace_end_bytes), plural(s.alive_at_trace_end_allocations, "allocation"));
  out += fmt::format("{}peak device memory: {}\n", indent, bytes_str(s.peak_bytes));
  out += fmt::format("{}leaked:             {} in {} allocation{}\n", indent, bytes_str(s.leaked_bytes),
                     s.leaked_allocations, s.leaked_allocations == 1 ? "" : "s");
  if (s.suppressed_allocations)
    out += fmt::format("{}suppressed:         {} in {} allocations\n", indent,
                       bytes_str(s.suppressed_bytes), s.suppressed_allocations);
  for (uint8_t k = 1; k <= format::kMemoryKindMax; ++k) {
    const KindCounters& c = s.by_kind[k];
    if (c.allocations == 0 && c.frees == 0) continue;
    out += fmt::format("{}  {:<15} {} allocs, {} frees, live {}, peak {}\n", indent,
                       format::memory_kind_name(static_cast<MemoryKind>(k)), c.allocations, c.frees,
                       bytes_str(c.live_bytes), bytes_str(c.peak_bytes));
  }
}

void suppressions_text(std::string& out, const Report& report) {
  bool any = false;
  for (const Suppression& s : report.suppressions_used) any |= s.hit_count > 0;
  if (!any) return;
  out += "Suppressions used:\n  count      bytes template\n";
  for (const Suppression& s : report.suppressions_used)
    if (s.hit_count) out += fmt::format("  {:>5} {:>10} {}\n", s.hit_count, s.hit_bytes, s.pattern);
  out += "\n";
}


std::string rank_label(const RankEntry& e) {
  return e.rank >= 0 ? fmt::format("rank {} (pid {})", e.rank, e.pid) : fmt::format("pid {}", e.pid);
}

std::string ranks_text(const Ranks& r) {
  if (!r.present()) return {};
  std::string out = fmt::format("== ranks: {} processes\n", r.per_rank.size());
  for (const RankEntry& e : r.per_rank) {
    out += fmt::format("   {:<22} host {}: peak {}, leaked {}, {}\n", rank_label(e),
                       e.host.empty() ? "?" : e.host, human_bytes(e.peak_bytes),
                       human_bytes(e.leaked_bytes), plural(e.findings.size(), "finding"));
  }
  const RankEntry& heavy = r.per_rank[r.heaviest];
  const RankEntry& light = r.per_rank[r.lightest];
  if (r.heaviest == r.lightest) {
    out += "   imbalance: none (every rank peaked at the same bytes)\n\n";
    return out;
  }
  std::string ratio = light.peak_bytes ? fmt::format(" ({:.2f}x)", static_cast<double>(heavy.peak_bytes) /
                                                                     static_cast<double>(light.peak_bytes))
                                       : "";
  out += fmt::format("   imbalance: {} peaks {} above {}{}\n", rank_label(heavy),
                     human_bytes(heavy.peak_bytes - light.peak_bytes), rank_label(light), ratio);
  for (const SiteDiff& s : r.sites)
    out += fmt::format("     +{} at {} (site {}: {} vs {} at the peaks)\n", human_bytes(static_cast<uint64_t>(s.bytes_diff)),
                       s.stack.empty() ? std::string("(no stack recorded)") : frame_at(s.stack.front(), false),
                       s.id, human_bytes(s.heaviest_bytes), human_bytes(s.lightest_bytes));
  out += "\n";
  return out;
}

// At the top: whether the findings can be trusted, before anything else is read.
std::string integrity_banner(const Report& report) {
  std::string out;
  const Verdict& v = report.integrity;
  if (!v.trusted) {
    out += fmt::format("WARNING: gpumemshim: {} of {} cannot be trusted in full ({}): the findings "
                       "cover only what was recorded\n",
                       v.not_clean, plural(report.processes.size(), "trace"), v.status);
    for (const ProcessReport& p : report.processes) {
      if (p.integrity.clean) continue;
      out += fmt::format("WARNING: trace {}: {}\n", p.trace, p.integrity.detail);
      if (!p.integrity.write_error_text.empty() &&
          p.integrity.detail.find(p.integrity.write_error_text) == std::string::npos)
        out += fmt::format("WARNING: trace {}: the shim's write failed: {}\n", p.trace,
                           p.integrity.write_error_text);
    }
  }
  for (const std::string& note : report_notes(report)) out += fmt::format("note: {}\n", note);
  return out.empty() ? out : out + "\n";
}

void integrity_lines(std::string& out, const ProcessReport& p) {
  const Integrity& i = p.integrity;
  if (i.clean)
    out += fmt::format("   integrity: {}{}\n", i.name,
                       i.status == IntegrityStatus::kUnchecked ? " (note: this format has no checksums)" : "");
  else
    out += fmt::format("   integrity: {}\n", i.detail);
  if (const std::string late = late_events_note(p.stats); !late.empty())
    out += fmt::format("   note: {}\n", late);
  if (p.no_memory_events) out += "   note: no CUDA memory events were recorded\n";
}

}  // namespace

std::string report_text(const Report& report) {
  std::string out = integrity_banner(report);
  for (const ProcessReport& p : report.processes) {
    out += fmt::format("== gpumemshim: pid {} ({}), {:.3f} s, {} events, trace {}{}{}\n", p.info.pid,
                       p.info.command_line.empty() ? "?" : p.info.command_line, p.duration_s,
                       p.stats.events(), p.trace,
                       p.truncated ? fmt::format(" [truncated at byte {}]", p.truncated_at) : "",
                       p.clean_exit ? "" : " [no clean exit]");
    if (p.info.rank >= 0 || !p.info.host.empty())
      out += fmt::format("   host {}, rank {}, ppid {}\n", p.info.host, p.info.rank, p.info.ppid);
    integrity_lines(out, p);
    summary_text(out, p.summary, "   ");
    out += fmt::format("   markers: {} (steps: {}, ranges: {})\n", p.summary.markers, p.summary.steps,
                       p.summary.ranges);
    out += accounting_text(p.accounting);
    out += libraries_text(p.libraries);
    out += frameworks_text(p.frameworks);
    out += "\n";
    for (const SiteGroup& g : p.leaks) {
      std::string label = g.kind == "cached"     ? "CACHED (allocator segment)"
                          : g.kind == "retained" ? "RETAINED"
                          : g.kind == "library"  ? "LIBRARY"
                          : g.kind == "alive"    ? "ALIVE WHEN THE TRACE ENDED"
                                                 : "LEAK";
      if (g.suppressed) label = "SUPPRESSED " + label;
      group_text(out, g, label.c_str());
    }
    for (const Growth& g : p.growth) growth_text(out, g);
    for (const DeviceFragmentation& d : p.fragmentation)
      if (d.torch || !d.ooms.empty())
        fragmentation_text(out, d, p.categories ? &*p.categories : nullptr);
    for (const Advice& a : p.advice)
      out += fmt::format("ADVICE {} ({}): {}\n  {}\n  evidence: {}\n\n", a.id, a.finding, a.title, a.action,
                         a.evidence);
    if (p.summary.torch.events)
      out += fmt::format("   torch: {} block allocs, {} frees, {} segment allocs, {} segment frees, "
                         "{} OOMs, {} blocks live ({})\n",
                         p.summary.torch.allocs, p.summary.torch.frees, p.summary.torch.segment_allocs,
                         p.summary.torch.segment_frees, p.summary.torch.ooms,
                         p.summary.torch.live_blocks, bytes_str(p.summary.torch.live_block_bytes));
    if (p.categories) categories_text(out, *p.categories);
    for (const Failure& f : p.failures) {
      out += fmt::format("FAILED {} of {} via {} [{}, device {}] pid {}: error {}, {} of device memory live{}\n",
                         format::memory_kind_name(f.event.kind), bytes_str(f.event.size),
                         format::api_name(f.event.api), format::memory_kind_name(f.event.kind),
                         f.event.device, f.pid, f.event.error, bytes_str(f.event.live_device_bytes),
                         f.event.has_meminfo ? fmt::format(", device free {} of {}",
                                                           bytes_str(f.event.meminfo_free),
                                                           bytes_str(f.event.meminfo_total))
                                             : "");
      frames_text(out, f.stack);
      out += "\n";
    }
    for (const SiteGroup& g : p.address_space) group_text(out, g, "UNRELEASED");
  }
  if (report.processes.size() > 1) {
    out += fmt::format("== total over {} processes (peak: sum of per-process peaks)\n",
                       report.processes.size());
    summary_text(out, report.summary, "   ");
    out += "\n";
  }
  out += ranks_text(report.ranks);
  suppressions_text(out, report);
  out += fmt::format("SUMMARY: gpumemshim: {} leaked in {} allocation{}.\n",
                     bytes_str(report.summary.leaked_bytes), report.summary.leaked_allocations,
                     report.summary.leaked_allocations == 1 ? "" : "s");
  return out;
}

std::string leaks_text(const Report& report) {
  std::string out;
  for (const SiteGroup* g : all_leaks(report, /*include_suppressed=*/false)) group_text(out, *g, "LEAK");
  suppressions_text(out, report);
  out += fmt::format("SUMMARY: gpumemshim: {} leaked in {} allocation{}",
                     bytes_str(report.summary.leaked_bytes), report.summary.leaked_allocations,
                     report.summary.leaked_allocations == 1 ? "" : "s");
  if (report.summary.suppressed_allocations)
    out += fmt::format(" ({} suppressed in {} allocations)", bytes_str(report.summary.suppressed_bytes),
                       report.summary.suppressed_allocations);
  out += ".\n";
  return out;
}

}  // namespace gpumemshim::analyzer

#include "report/integrity.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstring>
#include <utility>

namespace gpumemshim::analyzer {

Integrity integrity_of(const format::TraceIntegrity& t, format::Version version) {
  Integrity i;
  i.status = t.status;
  i.name = format::integrity_name(t, version);
  i.clean = t.clean();
  i.checked = t.checked;
  i.ended = t.ended;
  i.detail = t.detail;
  if (i.detail.empty() && !i.clean) i.detail = i.name;
  i.write_error = t.write_error;
  // The text of the errno the shim got, not of any errno of this process.
  if (t.write_error != 0) i.write_error_text = std::strerror(static_cast<int>(t.write_error));
  i.blocks = t.blocks;
  i.damaged_blocks = t.damaged_blocks;
  i.missing_blocks = t.missing_blocks;
  i.skipped_bytes = t.skipped_bytes;
  i.records_lost = t.records_lost;
  i.records_lost_exact = t.records_lost_exact;
  i.first_problem_offset = t.first_problem_offset;
  i.truncated = t.truncated;
  return i;
}

std::string late_events_note(const TraceStats& s) {
  if (s.late_events == 0) return {};
  return fmt::format(
      "{} events were buffered after a later flush mark (up to {:.3f} ms late: a thread stalled "
      "before buffering them); replayed where they were read, so a pair near one may be matched "
      "out of order",
      s.late_events, static_cast<double>(s.max_lateness_ns) / 1e6);
}

std::vector<size_t> first_same_file(const std::vector<std::string>& paths) {
  std::vector<size_t> first(paths.size());
  std::vector<std::pair<dev_t, ino_t>> ids(paths.size());
  std::vector<bool> known(paths.size(), false);
  for (size_t i = 0; i < paths.size(); ++i) {
    first[i] = i;
    struct stat st {};
    if (::stat(paths[i].c_str(), &st) != 0) continue;  // follows soft links
    ids[i] = {st.st_dev, st.st_ino};
    known[i] = true;
    for (size_t j = 0; j < i; ++j)
      if (known[j] && first[j] == j && ids[j] == ids[i]) {
        first[i] = j;
        break;
      }
  }
  return first;
}

bool same_recording(const ProcessInfo& a, const ProcessInfo& b) {
  return a.has_process_record && b.has_process_record && a.pid == b.pid && a.host == b.host &&
         a.start_wall_ns == b.start_wall_ns;
}

void drop_same_recordings(Report& report, std::vector<size_t>& kept_inputs) {
  std::vector<ProcessReport> kept;
  std::vector<size_t> kept_index;
  for (size_t i = 0; i < report.processes.size(); ++i) {
    ProcessReport& p = report.processes[i];
    const ProcessReport* original = nullptr;
    for (const ProcessReport& k : kept)
      if (same_recording(k.info, p.info)) {
        original = &k;
        break;
      }
    if (original) {
      report.duplicates.push_back(Duplicate{p.trace, original->trace, "the same recording"});
      continue;
    }
    kept.push_back(std::move(p));
    kept_index.push_back(kept_inputs[i]);
  }
  report.processes = std::move(kept);
  kept_inputs = std::move(kept_index);
}

Verdict verdict_of(const std::vector<ProcessReport>& processes) {
  Verdict v;
  const ProcessReport* worst = nullptr;
  for (const ProcessReport& p : processes) {
    if (!worst || p.integrity.status > worst->integrity.status) worst = &p;
    if (p.integrity.clean) continue;
    ++v.not_clean;
    v.problems.push_back(p.trace + ": " + p.integrity.detail);
  }
  if (worst) {
    v.worst = worst->integrity.status;
    v.status = worst->integrity.name;
  } else {
    v.status = "complete";
  }
  v.trusted = v.not_clean == 0;
  return v;
}

bool has_no_memory_events(const ProcessReport& p) {
  const Summary& s = p.summary;
  return s.allocations == 0 && s.frees == 0 && s.failed_allocations == 0 && s.failed_frees == 0 &&
         s.unmatched_frees == 0 && s.torch.events == 0;
}

std::vector<std::string> report_notes(const Report& report) {
  std::vector<std::string> notes;
  for (const Duplicate& d : report.duplicates)
    notes.push_back("trace " + d.trace + " is " + d.why + " as " + d.same_as + ": counted once");
  for (const ProcessReport& p : report.processes)
    if (p.no_memory_events) notes.push_back("trace " + p.trace + ": no CUDA memory events were recorded");
  return notes;
}

}  // namespace gpumemshim::analyzer

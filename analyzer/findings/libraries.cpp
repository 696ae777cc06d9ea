#include "findings/libraries.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "findings/leaks.h"
#include "findings/timeline.h"
#include "report/stack_view.h"

namespace gpumemshim::analyzer {

namespace {

std::string_view base_name(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

struct Known {
  std::string_view prefix;  // of the file name
  std::string_view name;
  std::string_view role;
};

// Longer prefixes first where one begins another (libcublasLt before libcublas).
constexpr std::array kKnown = {
    Known{"libc10", "PyTorch (caching allocator)", "framework"},
    Known{"libtorch", "PyTorch (caching allocator)", "framework"},
    Known{"libcaffe2", "PyTorch (caching allocator)", "framework"},
    Known{"libnccl", "NCCL", "library"},
    Known{"libcublasLt", "cuBLASLt", "library"},
    Known{"libcublas", "cuBLAS", "library"},
    Known{"libcudnn", "cuDNN", "library"},
    Known{"libcufft", "cuFFT", "library"},
    Known{"libcusparse", "cuSPARSE", "library"},
    Known{"libcusolver", "cuSOLVER", "library"},
    Known{"libcurand", "cuRAND", "library"},
    Known{"libcutensor", "cuTENSOR", "library"},
    Known{"libnvjpeg", "nvJPEG", "library"},
    Known{"libnvshmem", "NVSHMEM", "library"},
    Known{"libnvinfer", "TensorRT", "library"},
    Known{"libffi", "Python (ctypes/cffi)", "python"},
    Known{"_ctypes", "Python (ctypes/cffi)", "python"},
    Known{"libpython", "Python (ctypes/cffi)", "python"},
};

}  // namespace

LibraryIdentity identify_library(std::string_view module, std::string_view executable) {
  if (module.empty()) return {"unknown (no native stack recorded)", "unknown", ""};
  const std::string_view file = base_name(module);
  const std::string file_s(file);
  if (is_cupy_module(module)) return {std::string(kCupyPool), "framework", file_s};
  if (is_xla_module(module)) return {"XLA (jaxlib)", "framework", file_s};
  if (module.find("/torch/") != std::string_view::npos && file.starts_with("_C."))
    return {"PyTorch (caching allocator)", "framework", file_s};
  for (const Known& k : kKnown)
    if (file.starts_with(k.prefix)) return {std::string(k.name), std::string(k.role), file_s};
  if (!executable.empty() && (module == executable || file == base_name(executable))) {
    if (file.starts_with("python")) return {"Python (ctypes/cffi)", "python", file_s};
    return {file_s + " (the program)", "program", file_s};
  }
  return {file_s, "library", file_s};
}

std::vector<LibraryMemory> find_libraries(const LoadedTrace& trace, StackView& stacks) {
  const Replay& replay = trace.replay;
  const std::vector<RawSite>& raw = replay.sites();
  const std::vector<uint64_t>& live = replay.site_live();
  std::vector<uint64_t> at_peak;
  if (replay.peaks().sites().has_peak()) at_peak = replay.peaks().sites().at_peak(live);

  std::vector<LibraryMemory> rows;
  std::map<std::string, uint32_t> row_of;  // by name
  std::vector<uint32_t> group_of(raw.size(), TimelineTracker::kNoGroup);
  std::vector<std::set<std::string>> site_ids;
  std::vector<uint32_t> raw_sites_of;              // per row
  std::vector<std::pair<uint64_t, uint32_t>> top;  // per row: (own peak, raw site)
  for (uint32_t s = 0; s < raw.size(); ++s) {
    if (!replay.is_timeline_site(s) || replay.site_peak(s) == 0) continue;
    LibraryIdentity id =
        identify_library(stacks.asking_module(raw[s].stack_id), trace.process.executable);
    auto [it, inserted] = row_of.try_emplace(id.name, static_cast<uint32_t>(rows.size()));
    if (inserted) {
      rows.push_back(LibraryMemory{id.name, id.module, id.role, {}, 0, 0, 0, {}});
      site_ids.emplace_back();
      raw_sites_of.push_back(0);
      top.emplace_back(0, s);
    }
    const uint32_t r = it->second;
    group_of[s] = r;
    ++raw_sites_of[r];
    site_ids[r].insert(site_id(stacks.stable_key(raw[s].stack_id), raw[s].api));
    if (s < at_peak.size()) rows[r].at_peak_bytes += at_peak[s];
    if (s < live.size()) rows[r].end_bytes += live[s];
    if (replay.site_peak(s) > top[r].first) top[r] = {replay.site_peak(s), s};
  }
  std::vector<uint64_t> peaks;
  if (replay.timeline().site_log_complete())
    peaks = replay.timeline().group_peaks_from_log(group_of);
  for (uint32_t r = 0; r < rows.size(); ++r) {
    rows[r].sites = site_ids[r].size();
    rows[r].top_site = frame_label(stacks.frames(raw[top[r].second].stack_id));
    if (r < peaks.size())
      rows[r].peak_bytes = peaks[r];
    else if (raw_sites_of[r] == 1)
      rows[r].peak_bytes = top[r].first;
  }
  std::stable_sort(rows.begin(), rows.end(), [](const LibraryMemory& a, const LibraryMemory& b) {
    if (a.at_peak_bytes != b.at_peak_bytes) return a.at_peak_bytes > b.at_peak_bytes;
    return a.peak_bytes.value_or(0) > b.peak_bytes.value_or(0);
  });
  return rows;
}

const LibraryMemory* find_library(const ProcessReport& p, std::string_view name) {
  for (const LibraryMemory& r : p.libraries)
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace gpumemshim::analyzer

#include "findings/accounting.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "replay/load.h"

namespace gpumemshim::analyzer {

namespace {
uint64_t distance(uint64_t a, uint64_t b) {
  return a > b ? a - b : b - a;
}

// The GPU libraries worth naming, by the start of their file name. The first match names a module;
// cuBLASLt is listed before cuBLAS, whose prefix it shares.
struct KnownLibrary {
  std::string_view prefix;
  std::string_view name;
};
constexpr KnownLibrary kLibraries[] = {
    {"libcublasLt.", "cuBLASLt"}, {"libcublas.", "cuBLAS"}, {"libcudnn", "cuDNN"},
    {"libnccl", "NCCL"},          {"libcufft", "cuFFT"},    {"libcusparse", "cuSPARSE"},
    {"libcusolver", "cuSOLVER"},  {"libcurand", "cuRAND"},  {"libcutensor", "cuTENSOR"},
    {"libnvinfer", "TensorRT"},   {"libnvrtc", "NVRTC"},    {"libtorch_cuda", "libtorch_cuda"},
};

std::string_view file_name(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

const char* source_name(ViewSource s) {
  switch (s) {
    case ViewSource::kNvmlProcess:
      return "nvml";
    case ViewSource::kNvmlDevice:
      return "nvml_device";
    case ViewSource::kMemInfo:
      return "meminfo";
  }
  return "?";
}

// The best kind of view the device has samples of; kViewSources when none.
size_t best_source(const AccountingTracker::Device& d) {
  for (size_t s = 0; s < kViewSources; ++s)
    if (d.series[s].last.valid) return s;
  return kViewSources;
}

// a - b, held to int64_t's range: a damaged or hostile trace can hold sizes near 2^64.
int64_t difference(uint64_t a, uint64_t b) {
  constexpr auto kMost = static_cast<uint64_t>(INT64_MAX);
  if (a >= b) return a - b > kMost ? INT64_MAX : static_cast<int64_t>(a - b);
  return b - a > kMost ? -INT64_MAX : -static_cast<int64_t>(b - a);  // negatable: the writers do
}

AccountingPoint point(std::string at, int32_t device, ViewSource source, const ViewSample& s,
                      const std::vector<std::string>& libraries) {
  AccountingPoint p;
  p.at = std::move(at);
  p.device = device;
  p.time_ns = s.time_ns;
  p.source = source_name(source);
  p.device_wide = source != ViewSource::kNvmlProcess;
  p.device_view_bytes = s.view_bytes;
  p.device_total_bytes = s.total_bytes;
  p.traced_bytes = s.traced_bytes;
  p.not_explained_bytes = difference(s.view_bytes, s.traced_bytes);
  if (p.not_explained_bytes > 0) {
    p.likely_owners.push_back("CUDA context");
    p.likely_owners.insert(p.likely_owners.end(), libraries.begin(), libraries.end());
    if (p.device_wide) p.likely_owners.push_back("other processes");
  }
  return p;
}
}  // namespace

void ViewSeries::add(const ViewSample& s, uint64_t peak_time_ns) {
  if (peak_time_ns != peak_seen) {  // the peak moved since the previous sample: it lies between
    before_peak = last;
    after_peak = s;
    peak_seen = peak_time_ns;
  }
  last = s;
}

ViewSample ViewSeries::nearest_peak(uint64_t peak_time_ns) const {
  if (peak_time_ns != peak_seen) return last;  // the peak came after the last sample
  if (!before_peak.valid) return after_peak;
  if (!after_peak.valid) return before_peak;
  // Ties go to the later sample: it was taken with the peak's allocation made.
  return distance(before_peak.time_ns, peak_time_ns) < distance(after_peak.time_ns, peak_time_ns)
             ? before_peak
             : after_peak;
}

AccountingTracker::Device* AccountingTracker::device(int32_t d) {
  if (d < 0 || d >= kMaxDevices) return nullptr;
  if (static_cast<size_t>(d) >= devices_.size()) devices_.resize(static_cast<size_t>(d) + 1);
  Device& dev = devices_[static_cast<size_t>(d)];
  dev.seen = true;
  return &dev;
}

void AccountingTracker::add(int32_t d, ViewSource source, const ViewSample& s,
                            uint64_t peak_time_ns) {
  if (Device* dev = device(d)) dev->series[static_cast<size_t>(source)].add(s, peak_time_ns);
}

void AccountingTracker::process_memory(const format::ProcessMemoryRecord& r, uint64_t traced,
                                       uint64_t peak_time_ns) {
  const bool own = r.process_used_known();
  add(r.device, own ? ViewSource::kNvmlProcess : ViewSource::kNvmlDevice,
      ViewSample{true, r.time_ns, own ? r.process_used_bytes : r.device_used_bytes,
                 r.device_total_bytes, traced},
      peak_time_ns);
}

void AccountingTracker::meminfo(const format::MemInfoRecord& r, uint64_t traced,
                                uint64_t peak_time_ns) {
  const uint64_t used = r.total_bytes > r.free_bytes ? r.total_bytes - r.free_bytes : 0;
  add(r.device, ViewSource::kMemInfo, ViewSample{true, r.time_ns, used, r.total_bytes, traced},
      peak_time_ns);
}

void AccountingTracker::oom(uint64_t time_ns, int32_t d) {
  if (ooms_.size() >= kMaxOoms || d < 0 || static_cast<size_t>(d) >= devices_.size()) return;
  const Device& dev = devices_[static_cast<size_t>(d)];
  const size_t best = best_source(dev);
  if (best == kViewSources) return;  // no view of the device yet: nothing to compare
  ooms_.push_back(OomView{time_ns, d, static_cast<ViewSource>(best), dev.series[best].last});
}

std::vector<std::string> gpu_libraries(const LoadedTrace& trace) {
  std::vector<bool> loaded(std::size(kLibraries), false);
  for (const ModuleInfo& m : trace.modules) {
    const std::string_view name = file_name(m.path);
    for (size_t i = 0; i < std::size(kLibraries); ++i) {
      if (name.substr(0, kLibraries[i].prefix.size()) == kLibraries[i].prefix) {
        loaded[i] = true;
        break;
      }
    }
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < std::size(kLibraries); ++i)
    if (loaded[i]) out.emplace_back(kLibraries[i].name);
  return out;
}

std::vector<AccountingPoint> find_accounting(const LoadedTrace& trace) {
  const AccountingTracker& tracker = trace.replay.accounting();
  std::vector<std::string> libraries = gpu_libraries(trace);
  // Stream-ordered allocations come out of pools that keep freed memory reserved, unseen.
  if (trace.replay.summary().by_kind[static_cast<uint8_t>(MemoryKind::kPool)].allocations)
    libraries.emplace_back("memory pools (cudaMallocAsync)");
  const Peaks& peaks = trace.replay.peaks();
  std::vector<AccountingPoint> out;
  for (size_t d = 0; d < tracker.devices().size(); ++d) {
    const AccountingTracker::Device& dev = tracker.devices()[d];
    const size_t best = best_source(dev);
    if (!dev.seen || best == kViewSources) continue;
    const ViewSeries& series = dev.series[best];
    const auto source = static_cast<ViewSource>(best);
    const auto device = static_cast<int32_t>(d);
    if (peaks.device_bytes() > 0) {
      const ViewSample at_peak = series.nearest_peak(peaks.time_ns());
      // The last sample is the end's: the peak's line would repeat it.
      if (at_peak.valid && at_peak.time_ns != series.last.time_ns)
        out.push_back(point("peak", device, source, at_peak, libraries));
    }
    out.push_back(point("end", device, source, series.last, libraries));
  }
  for (const OomView& o : tracker.ooms())
    out.push_back(point("oom", o.device, o.source, o.sample, libraries));
  return out;
}

std::string accounting_source_label(const AccountingPoint& p) {
  if (p.source == "nvml") return "NVML, this process";
  if (p.source == "nvml_device") return "NVML, whole device";
  return "cudaMemGetInfo, whole device";
}

}  // namespace gpumemshim::analyzer

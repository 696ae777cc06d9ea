// Every byte accounted: the device's own view of the process's memory (the shim's NVML samples,
// else the program's cudaMemGetInfo calls) against the live device bytes the trace explains at the
// same moment. The tracker, fed by the replay's core, keeps per device and per kind of view only
// the samples the finding needs: those on either side of the process's peak, the last one, and the
// last one before each OOM, each with what the trace held on that device when it was taken.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gpumemshim/analyzer/report.h"
#include "gpumemshim/format/records.h"

namespace gpumemshim::analyzer {

struct LoadedTrace;

// The kinds of device view, best first: a finding uses the best one a device has.
enum class ViewSource : uint8_t {
  kNvmlProcess = 0,  // NVML's used bytes of this pid: what nvidia-smi lists for the process
  kNvmlDevice = 1,   // NVML's used bytes of the whole device (the pid was not listed)
  kMemInfo = 2,      // cudaMemGetInfo / cuMemGetInfo: total - free, the whole device
};
inline constexpr size_t kViewSources = 3;

struct ViewSample {
  bool valid = false;
  uint64_t time_ns = 0;
  uint64_t view_bytes = 0;
  uint64_t total_bytes = 0;
  uint64_t traced_bytes = 0;  // the trace's live device bytes on the device at time_ns
};

// The samples of one kind of view of one device.
struct ViewSeries {
  ViewSample last;
  ViewSample before_peak, after_peak;  // around the latest peak seen
  uint64_t peak_seen = UINT64_MAX;     // the peak time before_peak and after_peak are about

  void add(const ViewSample& s, uint64_t peak_time_ns);
  // The sample nearest to the peak at `peak_time_ns` (the latest), once every sample was added.
  ViewSample nearest_peak(uint64_t peak_time_ns) const;
};

struct OomView {
  uint64_t time_ns = 0;
  int32_t device = 0;
  ViewSource source = ViewSource::kNvmlProcess;
  ViewSample sample;  // the device's last view before the OOM
};

class AccountingTracker {
 public:
  static constexpr size_t kMaxOoms = 64;
  static constexpr int32_t kMaxDevices = 4096;

  // traced: the trace's live device bytes on r.device now; peak_time_ns: when the process's
  // live device bytes last peaked (0: no peak yet).
  void process_memory(const format::ProcessMemoryRecord& r, uint64_t traced, uint64_t peak_time_ns);
  void meminfo(const format::MemInfoRecord& r, uint64_t traced, uint64_t peak_time_ns);
  // An allocation of device memory failed for lack of memory (or PyTorch's allocator said so).
  void oom(uint64_t time_ns, int32_t device);

  struct Device {
    bool seen = false;
    ViewSeries series[kViewSources];
  };
  const std::vector<Device>& devices() const { return devices_; }
  const std::vector<OomView>& ooms() const { return ooms_; }

 private:
  Device* device(int32_t d);
  void add(int32_t device, ViewSource source, const ViewSample& s, uint64_t peak_time_ns);

  std::vector<Device> devices_;
  std::vector<OomView> ooms_;
};

// GPU libraries among the loaded modules that hold device memory outside the traced APIs (their
// kernels and modules, workspaces from the driver), by display name, in a fixed order.
std::vector<std::string> gpu_libraries(const LoadedTrace& trace);

// The accounting points of one process: per device with a view, the peak, the end and each OOM.
std::vector<AccountingPoint> find_accounting(const LoadedTrace& trace);

// For renderers: "NVML, this process", "NVML, whole device", "cudaMemGetInfo, whole device".
std::string accounting_source_label(const AccountingPoint& p);

}  // namespace gpumemshim::analyzer

#include "findings/failures.h"

namespace gpumemshim::analyzer {

const FailureEvent& FailureLog::failed(const format::AllocFailedRecord& r,
                                       uint64_t live_device_bytes) {
  FailureEvent& f = events_.emplace_back();
  f.time_ns = r.time_ns;
  f.thread_id = r.thread_id;
  f.device = r.device;
  f.api = r.api;
  f.kind = r.kind;
  f.size = r.size;
  f.error = r.error;
  f.stack_id = r.stack_id;
  f.live_device_bytes = live_device_bytes;
  if (auto m = meminfo_.find(r.device); m != meminfo_.end()) {
    f.has_meminfo = true;
    f.meminfo_free = m->second.first;
    f.meminfo_total = m->second.second;
  }
  return f;
}

}  // namespace gpumemshim::analyzer

// Marker names as records carry them: cut to kMaxMarkerName bytes, because a record must fit the
// thread's scratch (a dropped push would leave its pop unmatched). Shared by the marker C API and
// the NVTX injection.
#pragma once
#include <cstddef>
#include <cstring>

namespace gpumemshim::shim {

inline constexpr size_t kMaxMarkerName = 1024;

// `name` itself when it fits, else its first kMaxMarkerName bytes copied into `buf`
// (kMaxMarkerName + 1 bytes); "" for nullptr. No allocation: called from the program's threads.
inline const char* cut_marker_name(const char* name, char* buf) {
  if (!name) return "";
  size_t n = strnlen(name, kMaxMarkerName + 1);
  if (n <= kMaxMarkerName) return name;
  std::memcpy(buf, name, kMaxMarkerName);
  buf[kMaxMarkerName] = '\0';
  return buf;
}

}  // namespace gpumemshim::shim

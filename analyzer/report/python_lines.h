// CPython 3.11/3.12 location tables (co_linetable, PEP 657; CPython's Objects/locations.md):
// the source line of an instruction offset. Plain code, header-only, no Python needed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gpumemshim::analyzer {

namespace python_lines_detail {
// 6-bit chunks, bit 6 set: more chunks follow.
inline uint32_t read_varint(const uint8_t*& p, const uint8_t* end) {
  uint32_t value = 0;
  unsigned shift = 0;
  while (p < end) {
    uint8_t b = *p++;
    if (shift < 32) value |= static_cast<uint32_t>(b & 63) << shift;
    shift += 6;
    if (!(b & 64)) break;
  }
  return value;
}
inline int32_t read_svarint(const uint8_t*& p, const uint8_t* end) {
  uint32_t u = read_varint(p, end);
  return (u & 1) ? -static_cast<int32_t>(u >> 1) : static_cast<int32_t>(u >> 1);
}
}  // namespace python_lines_detail

// The line of the instruction at `offset` (in code units, 2 bytes each) of a code object whose
// co_firstlineno is `first_line`; -1 when the table says the instruction has no line, and
// `first_line` when the offset is past the table (or the table is empty).
inline int64_t line_for_offset(std::string_view table, int64_t first_line, uint64_t offset) {
  namespace d = python_lines_detail;
  const auto* p = reinterpret_cast<const uint8_t*>(table.data());
  const uint8_t* end = p + table.size();
  int64_t line = first_line;
  uint64_t start = 0;
  while (p < end) {
    uint8_t head = *p++;
    if (!(head & 0x80)) continue;  // not an entry start: resynchronise
    unsigned code = (head >> 3) & 15;
    uint64_t length = (head & 7) + 1u;
    int32_t delta = 0;
    switch (code) {
      case 15: break;                                   // no location
      case 14: delta = d::read_svarint(p, end); break;  // long form (end line, columns follow)
      case 13: delta = d::read_svarint(p, end); break;  // no columns
      case 10: case 11: case 12: delta = static_cast<int32_t>(code) - 10; break;  // one line
      default: break;                                   // short forms: same line
    }
    line += delta;
    // Skip the rest of the entry (column data): up to the next byte with bit 7 set.
    while (p < end && !(*p & 0x80)) ++p;
    if (offset < start + length) return code == 15 ? -1 : line;
    start += length;
  }
  return first_line;
}

}  // namespace gpumemshim::analyzer

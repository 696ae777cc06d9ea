// Numbers as the reports write them for people.
#pragma once
#include <cstdint>
#include <string>

namespace gpumemshim::analyzer {

// "1.50 MiB" (binary units, two decimals; "512 B" below a KiB).
std::string human_bytes(uint64_t bytes);

// A pc as the reports write it: fmt's "{:#x}" ("0x7f12ab", "0x0").
std::string pc_hex(uint64_t pc);

}  // namespace gpumemshim::analyzer

// Advice for CuPy's memory pool: it keeps every block its arrays free, for CuPy alone. When it held
// much of the device at the process's peak and that peak came near what the process may use, or an
// allocation failed for lack of memory, the pool's cache is worth giving back
// (`free_all_blocks()`) or capping (`set_limit`). Read from the "by library" rows (libraries.h).
#pragma once
#include <cstdint>
#include <vector>

namespace gpumemshim::analyzer {

struct Advice;
struct ProcessReport;

void advise_cupy_pool(const ProcessReport& p, uint64_t capacity, std::vector<Advice>& out);

}  // namespace gpumemshim::analyzer

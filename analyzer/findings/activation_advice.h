// Advice for an OOM that activations filled (memory by category, categories.h): gradient
// checkpointing at the heaviest activation sites, mixed precision, and a micro-batch that fits,
// each with its evidence in figures. Without an OOM, the same for a peak within 10 % of
// `capacity` (the process's cap, else the device), its micro-batch then halving the batch. An OOM
// or peak that the weights, their gradients or the optimizer's state filled gets none of it.
#pragma once
#include <cstdint>
#include <vector>

namespace gpumemshim::analyzer {

struct Advice;
struct ProcessReport;

void advise_activations(const ProcessReport& p, uint64_t capacity, std::vector<Advice>& out);

}  // namespace gpumemshim::analyzer

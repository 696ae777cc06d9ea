// Advice for an OOM that activations filled (memory by category, categories.h): gradient
// checkpointing at the heaviest activation sites, mixed precision, and a micro-batch that fits,
// each with its evidence in figures. An OOM that the weights, their gradients or the optimizer's
// state filled gets none of it.
#pragma once
#include <vector>

namespace gpumemshim::analyzer {

struct Advice;
struct ProcessReport;

void advise_activations(const ProcessReport& p, std::vector<Advice>& out);

}  // namespace gpumemshim::analyzer

// Where step boundaries come from, best first: the program's own gpumemshim_step (C or the Python
// package), the Python package's hook after every torch optimizer step (a step named
// "optimizer.step"), NVTX ranges named like a step ("step 12", "iteration", "batch", ...). A
// program may have several; counting them all would cut bytes/step in half or worse, so once a
// better source has marked a step the lesser ones stop marking.
#pragma once

namespace gpumemshim::shim {

enum class StepSource : int { kNvtx = 1, kOptimizer = 2, kProgram = 3 };

// Records a step marker unless a better source already marks steps.
void record_step(StepSource source, const char* name);

// True for NVTX range / mark names that denote one training step: case-insensitively starting
// with "step", "iter", "batch", "train_step" or "training_step".
bool is_step_name(const char* name);

}  // namespace gpumemshim::shim

"""H200 scenario: PyTorch allocating and freeing tensors under the current PYTORCH_CUDA_ALLOC_CONF.
Prints a deterministic result line and writes the allocator's own counters to argv[1] as JSON."""
import json
import sys

import torch

torch.manual_seed(0)
dev = torch.device("cuda")
kept = []
total = 0.0
for step in range(20):
    sizes = [1 << 10, 1 << 20, 7 << 20, 33 << 20, 130 << 20]
    tensors = [torch.ones(s // 4, device=dev) for s in sizes]
    total += sum(float(t.sum()) for t in tensors)
    if step % 5 == 0:
        kept.append(tensors[3])
    del tensors
torch.cuda.synchronize()
del kept
torch.cuda.empty_cache()
stats = torch.cuda.memory_stats()
with open(sys.argv[1], "w") as f:
    json.dump({k: v for k, v in stats.items() if k.startswith(("segment.", "num_", "allocation.all"))}, f)
print(f"total={total:.1f}")

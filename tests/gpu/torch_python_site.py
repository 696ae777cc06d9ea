"""H200 scenario: PyTorch keeps 64 MiB tensors alive at a known line until exit. Each needs a new
caching-allocator segment, so each cudaMalloc must carry this script's Python frames."""
import torch

kept = []


def grow(n):
    for _ in range(n):
        kept.append(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))  # site: python keep


grow(4)
torch.cuda.synchronize()
print(len(kept))

"""cuBLAS and NCCL in one process of one rank (issue 23): their own device memory is named in the
by-library table. No gpumemshim import."""
import os

import torch
import torch.distributed as dist

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29561")
dist.init_process_group("nccl", rank=0, world_size=1)
a = torch.randn(2048, 2048, device="cuda")
for _ in range(5):
    b = a @ a  # cuBLAS
    dist.all_reduce(b)  # NCCL
torch.cuda.synchronize()
dist.destroy_process_group()
print("done")

"""Several ranks on one GPU: a small DDP training loop, two ranks sharing the H200 (gloo backend, or
nccl when the machine has a GPU per rank), rank 1 deliberately heavier. Launched by torchrun
under `gpumemshim record -o .../rank%r.%p.trace`.
Usage: torchrun --nproc-per-node 2 ddp_ranks.py [BACKEND]"""
import os
import sys

import torch
import torch.distributed as dist

backend = sys.argv[1] if len(sys.argv) > 1 else "gloo"
dist.init_process_group(backend)
rank = dist.get_rank()
ngpu = torch.cuda.device_count()
dev = torch.device("cuda", rank % ngpu)
torch.cuda.set_device(dev)
torch.manual_seed(rank)
model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.ReLU(),
                            torch.nn.Linear(2048, 16)).to(dev)
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
extra = None
if rank == 1:
    extra = torch.empty(256 << 20, dtype=torch.uint8, device=dev)  # site: rank1_extra
for step in range(20):
    x = torch.randn(128, 1024, device=dev)
    loss = ddp(x).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
dist.barrier()
print(f"rank {rank} done", extra is not None)
dist.destroy_process_group()

"""GPU scenarios for PyTorch leaks: a small training loop with no gpumemshim import (zero code
change: the shim's sitecustomize attaches the torch bridge and marks optimizer steps).
  leak_loss     (a) a held-out loss accumulated as a tensor: every step's graph stays alive
  keep_outputs  (b) every step's output kept in a list
  clean         (c) the same loop without either: the allocator's cache only
Usage: python torch_training.py MODE [STEPS]"""
import sys

import torch
import torch.nn.functional as F

mode = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
torch.manual_seed(0)
dev = torch.device("cuda")
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x_val = torch.randn(256, 512, device=dev)
y_val = torch.randint(0, 10, (256,), device=dev)
total_loss = 0
outputs = []
for step in range(steps):
    x = torch.randn(64, 512, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    opt.zero_grad(set_to_none=True)
    out = model(x)  # site: forward
    loss = F.cross_entropy(out, y)
    loss.backward()
    opt.step()
    if mode == "leak_loss":
        total_loss += F.cross_entropy(model(x_val), y_val)  # site: loss_accumulation
    elif mode == "keep_outputs":
        outputs.append(out)
torch.cuda.synchronize()
print(f"{mode} done", len(outputs), float(total_loss) > 0 if mode == "leak_loss" else "")

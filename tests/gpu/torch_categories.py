"""GPU scenario for memory by category (zero code change: no gpumemshim import). A small MLP whose
parameters outweigh its activations, trained a few steps with AdamW, so that the peak is in an
optimizer step: every gradient alive, the state (exp_avg, exp_avg_sq) twice the parameters, and the
last forward's output and input still held by the script. Prints the parameters' bytes as JSON.
Usage: python torch_categories.py [STEPS]"""
import json
import sys

import torch
import torch.nn.functional as F

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 6
torch.manual_seed(0)
dev = torch.device("cuda")
model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048),
                            torch.nn.ReLU(), torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
                            torch.nn.Linear(2048, 1024)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(steps):
    x = torch.randn(64, 2048, device=dev)
    y = torch.randint(0, 1024, (64,), device=dev)
    opt.zero_grad(set_to_none=True)
    out = model(x)  # site: forward
    loss = F.cross_entropy(out, y)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print(json.dumps({"param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
                  "param_tensors": len(list(model.parameters())), "steps": steps}))

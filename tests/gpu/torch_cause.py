"""GPU scenarios for why memory goes where it goes, written as users write them (no gpumemshim
import: the shim's sitecustomize attaches the torch bridge, marks optimizer steps and learns the
tensors' categories).
  retain_accumulate  a loss summed across steps as a tensor, backward(retain_graph=True): every
                     step's graph and its saved activations stay alive
  list_losses        validation losses kept in a list, computed with autograd on: their graphs and
                     saved activations stay alive (no retain_graph)
  dict_outputs       validation outputs kept in a dict, autograd on
  clean              the same training loop without any of these
  activation_oom     a deep MLP under a 3 % memory-fraction cap, batch doubled until CUDA OOM in the
                     forward/backward pass: activations dominate
  weights_oom        the same cap, layers added to a model until OOM: weights dominate
  fragmentation_oom  a 1.17 GiB cap; a 1 GiB block freed and cut into 16 blocks of 64 MiB, every
                     other one freed: 512 MiB free in the cache, no 256 MiB hole, so asking 256 MiB
                     fails (fragmentation, not the cap's size)
Usage: python torch_cause.py MODE [STEPS]"""
import sys

import torch
import torch.nn.functional as F

mode = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
torch.manual_seed(0)
dev = torch.device("cuda")


class Net(torch.nn.Module):
    def __init__(self, width=1024, depth=4):
        super().__init__()
        self.inp = torch.nn.Linear(512, width)
        self.hidden = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))
        self.out = torch.nn.Linear(width, 10)

    def forward(self, x):
        h = torch.relu(self.inp(x))  # site: forward_inp
        for layer in self.hidden:
            h = torch.relu(layer(h))  # site: forward_hidden
        return self.out(h)


def train_loop():
    model = Net().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x_val = torch.randn(512, 512, device=dev)
    y_val = torch.randint(0, 10, (512,), device=dev)
    total = 0
    val_losses = []
    outputs = {}
    for step in range(steps):
        x = torch.randn(256, 512, device=dev)
        y = torch.randint(0, 10, (256,), device=dev)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)  # site: train_loss
        if mode == "retain_accumulate":
            loss.backward(retain_graph=True)
            total = total + loss  # site: accumulate
        else:
            loss.backward()
        opt.step()
        if mode == "list_losses":
            val_loss = F.cross_entropy(model(x_val), y_val)  # site: val_loss
            val_losses.append(val_loss)  # site: append
        elif mode == "dict_outputs":
            outputs[step] = model(x_val)  # site: dict_store
    torch.cuda.synchronize()
    print(f"{mode} done", len(val_losses), len(outputs), float(total) > 0 if mode == "retain_accumulate" else "")


def oom_under_cap(grow):
    torch.cuda.set_per_process_memory_fraction(0.03)
    try:
        grow()
    except torch.OutOfMemoryError as e:
        print(f"{mode}: OutOfMemoryError", str(e).splitlines()[0][:200])
        return
    print(f"{mode}: no OOM")


def activation_oom():
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.GELU())
                                  for _ in range(24)]).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    batch = 256
    while True:
        x = torch.randn(batch, 2048, device=dev)
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()  # site: activation_step
        opt.step()
        batch *= 2


def weights_oom():
    layers = []
    while True:
        layers.append(torch.nn.Linear(8192, 8192, device=dev))  # site: add_layer
        x = torch.randn(8, 8192, device=dev)
        for layer in layers:
            x = layer(x)


def fragmentation_oom():
    total = torch.cuda.get_device_properties(dev).total_memory
    torch.cuda.set_per_process_memory_fraction((1200 << 20) / total)
    big = torch.empty(1 << 30, dtype=torch.uint8, device=dev)  # one 1 GiB segment
    del big
    blocks = [torch.empty(64 << 20, dtype=torch.uint8, device=dev) for _ in range(16)]  # cut from it
    del blocks[::2]
    try:
        torch.empty(256 << 20, dtype=torch.uint8, device=dev)  # site: fragmented_request
    except torch.OutOfMemoryError as e:
        print(f"{mode}: OutOfMemoryError", str(e).splitlines()[0][:200])
        return
    print(f"{mode}: no OOM")


if mode in ("retain_accumulate", "list_losses", "dict_outputs", "clean"):
    train_loop()
elif mode == "activation_oom":
    oom_under_cap(activation_oom)
elif mode == "weights_oom":
    oom_under_cap(weights_oom)
elif mode == "fragmentation_oom":
    fragmentation_oom()
else:
    sys.exit(f"unknown mode {mode}")

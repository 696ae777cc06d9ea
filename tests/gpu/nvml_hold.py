"""H200 scenario: PyTorch holds 512 MiB of tensors and cuBLAS's handles and workspaces still until
its stdin closes, so that nvidia-smi can be asked about it while it runs. Prints "ready PCI_BUS_ID"
(CUDA device 0's, as nvidia-smi writes it; "?" when this torch does not tell) once it holds."""
import sys

import torch

kept = [torch.ones(64 << 20, dtype=torch.float32, device="cuda") for _ in range(2)]
a = torch.randn(2048, 2048, device="cuda")
kept.append(a @ a)  # loads cuBLAS: its handle and workspace are made outside the traced APIs
torch.cuda.synchronize()
props = torch.cuda.get_device_properties(0)
bus = "?"
if all(hasattr(props, f) for f in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
    bus = f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
print("ready", bus, flush=True)
sys.stdin.read()
print(len(kept))

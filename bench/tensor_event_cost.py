"""What the shim's recording costs per PyTorch tensor event, on the CPU, with no GPU and no torch:
the bridge's entry point (gpumemshim_torch_event) called from Python at a given stack depth, an
alloc and a free_completed per pair, against the same calls with an action the shim ignores (so
the ctypes call itself cancels out). Figures: docs/benchmarks.md "PyTorch step overhead".

    LD_PRELOAD=$PWD/build/lib/libgpumemshim.so GPUMEMSHIM_STACKS=python GPUMEMSHIM_OUTPUT=/tmp/t.%p.trace \\
        taskset -c 0 python3 bench/tensor_event_cost.py [PAIRS]
Python 3.11 or 3.12 (the versions whose frames the shim reads)."""
import ctypes
import sys
import time

ALLOC, FREE_COMPLETED, IGNORED = 1, 3, 0
pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
try:
    event = ctypes.CDLL(None).gpumemshim_torch_event
except AttributeError:
    sys.exit("the shim is not loaded (LD_PRELOAD=.../libgpumemshim.so)")
event.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
event.restype = None


def at_depth(depth, action_a, action_b):
    if depth > 0:
        return at_depth(depth - 1, action_a, action_b)
    start = time.perf_counter()
    for _ in range(pairs):
        event(action_a, 0, 0x7F0000001000, 4096, 0)
        event(action_b, 0, 0x7F0000001000, 4096, 0)
    return (time.perf_counter() - start) / pairs * 1e9


for depth in (0, 10, 30):
    ignored = min(at_depth(depth, IGNORED, IGNORED) for _ in range(3))
    recorded = min(at_depth(depth, ALLOC, FREE_COMPLETED) for _ in range(3))
    print(f"Python depth {depth:2d}: {recorded - ignored:5.0f} ns per alloc + free_completed pair")

"""What telling the shim a backward pass's gradients costs, on the CPU, with no GPU and no torch:
the package's Tagger (gpumemshim/_categories.py) on stand-in CUDA tensors, every gradient new at
each pass (zero_grad's set_to_none), its batch told in one call (gpumemshim_tensor_tags) against
one ctypes call per gradient (gpumemshim_tensor_tag). The stand-in's methods are plain Python, so
torch's own tensor calls (data_ptr, untyped_storage) come on top of both. Figures:
docs/benchmarks.md "PyTorch step overhead".

    LD_PRELOAD=$PWD/build/lib/libgpumemshim.so GPUMEMSHIM_OUTPUT=/tmp/t.%p.trace \\
        taskset -c 0 python3 bench/tagging_cost.py [GRADIENTS] [PASSES]"""
import ctypes
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
from gpumemshim import _categories  # noqa: E402

gradients = int(sys.argv[1]) if len(sys.argv) > 1 else 200
passes = int(sys.argv[2]) if len(sys.argv) > 2 else 2000


class Tensor:
    is_cuda = True

    def __init__(self, address):
        self.address = address
        self.grad = None

    def data_ptr(self):
        return self.address

    def get_device(self):
        return 0

    def untyped_storage(self):
        return self


class Optimizer:
    def __init__(self, params):
        self.param_groups = [{"params": params}]
        self.state = {}


batched = _categories._shim_tags()
if batched is None:
    sys.exit("the shim is not loaded (LD_PRELOAD=.../libgpumemshim.so)")
one = ctypes.CDLL(None).gpumemshim_tensor_tag
one.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_int]
one.restype = None


def one_by_one(batch):
    for device, address, category in batch:
        one(device, address, category)


def per_pass(tell):
    params = [Tensor(0x7F0000000000 + 0x1000 * i) for i in range(gradients)]
    tagger = _categories.Tagger(tell, Tensor)
    optimizer = Optimizer(params)  # the tagger holds optimizers weakly
    tagger.new_optimizer(optimizer)
    grads = [[Tensor(0x7F1000000000 + 0x1000 * (i + gradients * k)) for i in range(gradients)]
             for k in range(2)]
    start = time.perf_counter()
    for n in range(passes):
        for p, g in zip(params, grads[n % 2]):
            p.grad = g
        tagger._seen.clear()  # every gradient unseen, as after a set_to_none zero_grad
        tagger.gradients()
    elapsed = time.perf_counter() - start
    assert len(tagger._seen) == gradients, "the gradients were not told"
    return elapsed / passes * 1e6


def setting_only():
    params = [Tensor(0) for _ in range(gradients)]
    grads = [[Tensor(0) for _ in range(gradients)] for _ in range(2)]
    start = time.perf_counter()
    for n in range(passes):
        for p, g in zip(params, grads[n % 2]):
            p.grad = g
    return (time.perf_counter() - start) / passes * 1e6


base = min(setting_only() for _ in range(3))
rounds = {"one call per backward pass": batched, "one call per gradient": one_by_one}
for name, tell in rounds.items():
    cost = min(per_pass(tell) for _ in range(3)) - base
    print(f"{name:28s}: {cost:7.1f} us per pass of {gradients} new gradients "
          f"({cost * 1000 / gradients:5.0f} ns each)")

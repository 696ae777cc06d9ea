"""Uses the gpumemshim Python package the way a training script would: steps around CUDA work, a
mark and an expect_no_leak region. The (fake) CUDA runtime is loaded with ctypes.
    markers_app.py <libcudart path> <steps>
Prints one JSON line: what active() said and the modules the package import pulled in."""
import ctypes
import json
import sys

before = set(sys.modules)
import gpumemshim  # noqa: E402

imported = sorted(set(sys.modules) - before)

cudart = ctypes.CDLL(sys.argv[1])
steps = int(sys.argv[2])


def alloc_free(size):
    ptr = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size)) == 0
    assert cudart.cudaFree(ptr) == 0


gpumemshim.mark("start")
for i in range(steps):
    alloc_free(1 << 20)
    gpumemshim.step() if i % 2 else gpumemshim.step(f"step {i}")
with gpumemshim.expect_no_leak():
    alloc_free(1 << 16)
with gpumemshim.expect_no_leak("eval"):
    alloc_free(1 << 16)


@gpumemshim.expect_no_leak("decorated")
def decorated():
    alloc_free(1 << 12)
    return 7


assert decorated() == 7
print(json.dumps({"active": gpumemshim.active(), "imported": imported}))

"""A multiprocessing worker started with the fork start method allocates through the (fake) CUDA
runtime and leaks; the worker ends through os._exit, as multiprocessing's forked workers do.
argv: libcudart path."""
import ctypes
import multiprocessing
import sys

cudart = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)


def allocate(size):
    ptr = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size)) == 0
    return ptr


def worker():
    allocate(3 << 20)  # leaked by the worker
    print("worker done", flush=True)


def main():
    kept = allocate(1 << 20)  # the parent's, before the fork: never in the worker's trace
    ctx = multiprocessing.get_context("fork")
    p = ctx.Process(target=worker)
    p.start()
    p.join()
    assert cudart.cudaFree(kept) == 0
    print("done", p.exitcode)


main()

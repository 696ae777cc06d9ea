"""Step markers for gpumemshim (DESIGN.md §6).

Under the shim (``LD_PRELOAD=libgpumemshim.so`` or ``gpumemshim record``) these calls write
Marker records into the trace; anywhere else every call is a silent no-op and ``active()`` is
False, so a training script may call them unconditionally::

    import gpumemshim
    for batch in loader:
        train_step(batch)
        gpumemshim.step()
    with gpumemshim.expect_no_leak("eval"):
        evaluate()

The shim's C API (``gpumemshim_step`` etc.) is found among the process's global symbols with
ctypes at the first call; importing this module loads nothing else and never imports torch.
"""

import threading

__all__ = ["step", "mark", "expect_no_leak", "active"]
__version__ = "0.1.0"

_lock = threading.Lock()
_api = None  # None: not looked up yet; False: no shim; else a _Api


class _Api:
    __slots__ = ("mark", "step", "region_begin", "region_end", "active")

    def __init__(self, lib, ctypes):
        for attr in self.__slots__:
            fn = getattr(lib, "gpumemshim_" + attr)  # AttributeError: not under the shim
            fn.argtypes = [] if attr == "active" else [ctypes.c_char_p]
            fn.restype = ctypes.c_int if attr == "active" else None
            setattr(self, attr, fn)


def _lookup():
    global _api
    if _api is None:
        with _lock:
            if _api is None:
                import ctypes  # here, not at import: keeps `import gpumemshim` ~1 ms

                try:
                    _api = _Api(ctypes.CDLL(None), ctypes)
                except (AttributeError, OSError):
                    _api = False
    return _api


def _bytes(name):
    if name is None:
        return None
    if isinstance(name, bytes):
        return name
    return str(name).encode("utf-8", "replace")


def active():
    """True when the shim is loaded and recording."""
    api = _lookup()
    return bool(api) and api.active() == 1


def step(name=None):
    """Marks a training-step boundary (call it once per step, e.g. after optimizer.step())."""
    api = _lookup()
    if api:
        api.step(_bytes(name))


def mark(name):
    """Records a named point event."""
    api = _lookup()
    if api:
        api.mark(_bytes(name))


class expect_no_leak:
    """Context manager (and decorator): memory allocated inside and still alive at its end is a
    leak. Recorded as a range named ``expect_no_leak:<name>``."""

    __slots__ = ("_name",)

    def __init__(self, name="expect_no_leak"):
        self._name = _bytes(name)

    def __enter__(self):
        api = _lookup()
        if api:
            api.region_begin(self._name)
        return self

    def __exit__(self, exc_type, exc, tb):
        api = _lookup()
        if api:
            api.region_end(self._name)
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with expect_no_leak(self._name):
                return fn(*args, **kwargs)

        return wrapper

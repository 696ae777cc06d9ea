"""Step markers for gpumemshim.

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

``attach_torch()`` loads the PyTorch bridge (``libgpumemshim_torch.so``) into a process that has
already initialised CUDA in torch, so that the trace gets tensor-level events of the caching
allocator::

    import torch, gpumemshim
    x = torch.zeros(1, device="cuda")   # CUDA (and the caching allocator) initialised
    gpumemshim.attach_torch()

Under the shim this happens by itself (zero code change): the shim's sitecustomize
(python/boot) attaches the bridge right after torch initialises CUDA, adds a step marker after every
``optimizer.step()`` and a ``torch.backward`` range around backward passes (see _autoattach.py).

PYTEST_DONT_REWRITE: the shim's boot imports this package before pytest starts, so pytest could
not rewrite it anyway (it would warn that it is already imported); it holds no test assertions.
"""

import os
import sys
import threading

__all__ = ["step", "mark", "expect_no_leak", "active", "attach_torch", "pause", "resume"]
try:  # written by the build from CMake's project version (python/CMakeLists.txt)
    from ._version import __version__
except ImportError:  # this source tree on PYTHONPATH, not built
    __version__ = "unknown"

_lock = threading.Lock()
_api = None  # None: not looked up yet; False: no shim; else a _Api


class _Api:
    _NAMED = ("mark", "step", "region_begin", "region_end", "range_push", "range_pop")
    __slots__ = _NAMED + ("active", "pause", "attribute")

    def __init__(self, lib, ctypes):
        for attr in self._NAMED:
            fn = getattr(lib, "gpumemshim_" + attr)  # AttributeError: not under the shim
            fn.argtypes = [ctypes.c_char_p]
            fn.restype = None
            setattr(self, attr, fn)
        self.active = lib.gpumemshim_active
        self.active.argtypes = []
        self.active.restype = ctypes.c_int
        self.pause = lib.gpumemshim_pause
        self.pause.argtypes = [ctypes.c_int]
        self.pause.restype = None
        # An older shim has no attributes: None, and nothing is written.
        self.attribute = getattr(lib, "gpumemshim_attribute", None)
        if self.attribute is not None:
            self.attribute.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
            self.attribute.restype = None


def _lookup():
    global _api
    if _api is None:
        with _lock:
            if _api is None:
                try:
                    import ctypes  # here, not at import: keeps `import gpumemshim` cheap

                    _api = _Api(ctypes.CDLL(None), ctypes)
                except (ImportError, AttributeError, OSError):
                    _api = False
    return _api


def _attribute(key, value):
    """Writes an Attribute record (key, value) into the trace: a fact about the process that the
    analysis reads by key. A no-op without the shim."""
    api = _lookup()
    if api and api.attribute is not None:
        api.attribute(_bytes(key), _bytes(value))


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


def pause():
    """Stops recording until resume(): the program runs on, its events are not in the trace, and
    its tensors are not tagged with their memory categories. For measuring the shim's own cost step
    by step in one process (tests/gpu/overhead.py)."""
    api = _lookup()
    if api:
        api.pause(1)
        _set_tagging_paused(True)


def resume():
    """Records again after pause()."""
    api = _lookup()
    if api:
        api.pause(0)
        _set_tagging_paused(False)


def _set_tagging_paused(paused):
    try:
        from gpumemshim import _categories

        _categories.set_paused(paused)
    except Exception:
        pass


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


_torch_lock = threading.Lock()
_torch_attached = False
_torch_no_bridge_said = False

_BRIDGE_NAME = "libgpumemshim_torch.so"
_SHIM_NAME = "libgpumemshim.so"


def _info(message):
    if os.environ.get("GPUMEMSHIM_LOG", "").strip().lower() == "quiet":
        return
    try:
        sys.stderr.write("gpumemshim: " + message + "\n")
        sys.stderr.flush()
    except Exception:  # a closed or odd stderr must not break the host program
        pass


def _bridge_path():
    """The torch bridge: GPUMEMSHIM_TORCH_BRIDGE (set by `gpumemshim record`), else the file next
    to the loaded shim (found in /proc/self/maps). None when there is none."""
    env = os.environ.get("GPUMEMSHIM_TORCH_BRIDGE")
    if env:
        return env if os.path.isfile(env) else None
    try:
        with open("/proc/self/maps", "r", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.rstrip("\n").split(None, 5)  # addr perms offset dev inode path
                path = fields[5] if len(fields) == 6 else ""
                if path.endswith("/" + _SHIM_NAME):
                    candidate = os.path.join(os.path.dirname(path), _BRIDGE_NAME)
                    return candidate if os.path.isfile(candidate) else None
    except OSError:
        pass
    return None


def attach_torch():
    """Loads the PyTorch bridge and attaches it to torch's CUDA caching allocator, once.

    Returns True when tensor-level events are being recorded (now or by an earlier call), False
    when not possible: no shim, torch not imported or its CUDA not initialised yet (call again
    later), no bridge found or one built for another torch (one info line on stderr), or the
    bridge declined (the cudaMallocAsync backend or a pluggable allocator: one info line).
    Never imports torch and never raises."""
    return _attach_torch(cuda_ready=False)


def _attach_torch(cuda_ready):
    # cuda_ready: called from torch's CUDA-initialisation queue, where torch.cuda.is_initialized()
    # is still False although the allocator is ready.
    global _torch_attached
    if _torch_attached:
        return True
    try:
        if not active():
            return False
        torch = sys.modules.get("torch")
        if torch is None:
            return False
        if not cuda_ready:
            try:
                if not torch.cuda.is_initialized():
                    return False
            except Exception:
                return False
        with _torch_lock:
            if _torch_attached:
                return True
            path = _bridge_path()
            if path is None:
                _say_once("no torch bridge (%s) found next to the shim or in "
                          "GPUMEMSHIM_TORCH_BRIDGE: recording runtime-level events only" % _BRIDGE_NAME)
                return False
            import ctypes

            try:
                lib = ctypes.CDLL(path)
                fn = lib.gpumemshim_torch_attach
            except (OSError, AttributeError) as e:
                _say_once("cannot load the torch bridge %s (%s): recording runtime-level events only"
                          % (path, e))
                return False
            built_for = _bridge_torch_version(lib, ctypes)
            running = str(getattr(torch, "__version__", ""))
            if built_for is not None and built_for != running:
                _say_once("the torch bridge %s was built for torch %s, this is torch %s: "
                          "recording runtime-level events only" % (path, built_for, running))
                return False
            fn.argtypes = []
            fn.restype = ctypes.c_int
            _torch_attached = fn() == 1
            if not _torch_attached:
                _say_once("torch bridge not attached (the allocator backend is %s: no "
                          "tensor-level events): recording runtime-level events only"
                          % _allocator_backend(torch))
            else:
                if os.environ.get("GPUMEMSHIM_LOG", "").strip().lower() in ("info", "debug"):
                    _info("torch bridge attached (torch %s): tensor-level events" % running)
            return _torch_attached
    except Exception:
        return False


def _bridge_torch_version(lib, ctypes):
    try:
        fn = lib.gpumemshim_torch_version
    except AttributeError:
        return None
    fn.argtypes = []
    fn.restype = ctypes.c_char_p
    value = fn()
    return value.decode("utf-8", "replace") if value else None


def _allocator_backend(torch):
    try:
        return torch.cuda.memory.get_allocator_backend()
    except Exception:
        return "unknown"


def _say_once(message):
    global _torch_no_bridge_said
    if not _torch_no_bridge_said:
        _torch_no_bridge_said = True
        _info(message)

import os

_initialized = False
_queued_calls = []
# The allocator's per-device memory fraction (1.0: no cap); FAKE_TORCH_MEMORY_FRACTION plays a cap
# set through the allocator's settings, before any Python call.
_fractions = {}


def is_initialized():
    return _initialized


def _lazy_call(callable):
    if _initialized:
        callable()
    else:
        _queued_calls.append(callable)


_initializing = False


def _lazy_init():
    # As torch: CUDA and the caching allocator are initialised, then the queued calls run (a call
    # into torch.cuda from one of them does not initialise again), then is_initialized() becomes
    # True.
    global _initialized, _initializing
    if _initialized or _initializing:
        return
    if os.environ.get("FAKE_TORCH_MEMORY_FRACTION"):
        _fractions[0] = float(os.environ["FAKE_TORCH_MEMORY_FRACTION"])
    _initializing = True
    try:
        for call in _queued_calls:
            call()
    finally:
        _initializing = False
    _initialized = True


def current_device():
    return 0


def device_count():
    return 1


def set_per_process_memory_fraction(fraction, device=None):
    # As torch: initialises CUDA first, then checks and sets.
    _lazy_init()
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    _fractions[current_device() if device is None else device] = fraction


def get_per_process_memory_fraction(device=None):
    _lazy_init()
    return _fractions.get(current_device() if device is None else device, 1.0)


class memory:
    @staticmethod
    def get_allocator_backend():
        return "native"

    # torch.cuda's functions are torch.cuda.memory's (imported from it): the same objects.
    set_per_process_memory_fraction = staticmethod(set_per_process_memory_fraction)
    get_per_process_memory_fraction = staticmethod(get_per_process_memory_fraction)

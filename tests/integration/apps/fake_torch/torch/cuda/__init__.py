_initialized = False
_queued_calls = []


def is_initialized():
    return _initialized


def _lazy_call(callable):
    if _initialized:
        callable()
    else:
        _queued_calls.append(callable)


def _lazy_init():
    # As torch: CUDA and the caching allocator are initialised, then the queued calls run, then
    # is_initialized() becomes True.
    global _initialized
    if _initialized:
        return
    for call in _queued_calls:
        call()
    _initialized = True


class memory:
    @staticmethod
    def get_allocator_backend():
        return "native"

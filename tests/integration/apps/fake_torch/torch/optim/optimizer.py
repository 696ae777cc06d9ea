import os

_global_step_post_hooks = []


def register_optimizer_step_post_hook(hook):
    _global_step_post_hooks.append(hook)


class Optimizer:
    def step(self):
        temporaries = int(os.environ.get("FAKE_OPTIMIZER_BYTES", "0"))
        if temporaries:  # the step's own temporaries, as the caching allocator reports them
            import ctypes

            ctypes.CDLL(os.environ["FAKE_TORCH_BRIDGE"]).fake_torch_block(ctypes.c_size_t(temporaries))
        for hook in _global_step_post_hooks:
            hook(self, (), {})

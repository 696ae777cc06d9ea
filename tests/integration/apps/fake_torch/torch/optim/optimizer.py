import collections
import os

_global_step_post_hooks = []


def register_optimizer_step_post_hook(hook):
    _global_step_post_hooks.append(hook)


class Optimizer:
    def __init__(self, params=(), make_state=None):
        self.param_groups = [{"params": list(params)}]
        self.state = collections.defaultdict(dict)
        self._make_state = make_state  # what the real optimizer's update would allocate

    def step(self):
        temporaries = int(os.environ.get("FAKE_OPTIMIZER_BYTES", "0"))
        if temporaries:  # the step's own temporaries, as the caching allocator reports them
            import ctypes

            ctypes.CDLL(os.environ["FAKE_TORCH_BRIDGE"]).fake_torch_block(ctypes.c_size_t(temporaries))
        if self._make_state is not None:
            for p in self.param_groups[0]["params"]:
                if p not in self.state:
                    self.state[p] = self._make_state(p)
        for hook in _global_step_post_hooks:
            hook(self, (), {})

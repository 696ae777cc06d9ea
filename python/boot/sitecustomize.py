"""gpumemshim's Python boot file (zero code change).

The shim (libgpumemshim.so) puts the directory holding this file at the front of PYTHONPATH, so
every Python process started under it runs this at start-up: it arranges for the PyTorch bridge to
attach when torch initialises CUDA, then runs the sitecustomize this one shadows, if any. It never
imports torch and never raises.
"""


def _gpumemshim_boot():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from gpumemshim import _autoattach

        _autoattach.install()
    except Exception as e:  # the host program must run on whatever happens here
        try:
            sys.stderr.write("gpumemshim: Python boot failed (%s): no automatic torch bridge\n" % e)
        except Exception:
            pass

    # Chain to the sitecustomize this file hides (a later PYTHONPATH entry or site-packages).
    ours = sys.modules.pop("sitecustomize", None)
    saved = sys.path[:]
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
        import importlib

        importlib.import_module("sitecustomize")
    except ImportError:
        if ours is not None:
            sys.modules["sitecustomize"] = ours
    except Exception as e:
        sys.stderr.write("gpumemshim: the chained sitecustomize failed: %r\n" % (e,))
    finally:
        sys.path[:] = saved


_gpumemshim_boot()
del _gpumemshim_boot

"""The ``gpumemshim`` command of the installed package, and ``python -m gpumemshim``: runs the
gpumemshim executable that CMake installed beside this package (``gpumemshim/bin``), or the one
of the install or build tree this copy of the package came from (``lib/gpumemshim-python``).

PYTEST_DONT_REWRITE: library code, imported by the shim's boot before pytest starts.
"""

import os
import sys


def _cli():
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [
        os.path.join(here, "bin", "gpumemshim"),  # the wheel: gpumemshim/bin
        # the shim's boot copy: <prefix>/lib/gpumemshim-python/gpumemshim -> <prefix>/bin
        os.path.join(here, os.pardir, os.pardir, os.pardir, "bin", "gpumemshim"),
    ]
    env = os.environ.get("GPUMEMSHIM_CLI")
    if env:
        candidates.insert(0, env)
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.normpath(path)
    return None


def main():
    cli = _cli()
    if cli is None:
        sys.stderr.write("gpumemshim: error: no gpumemshim executable beside the Python package "
                         "(%s); install it with `pip install` from the gpumemshim sources, or set "
                         "GPUMEMSHIM_CLI\n" % os.path.dirname(os.path.abspath(__file__)))
        return 2
    # `doctor` asks the Python this command runs on (a venv's) about torch, JAX and CuPy.
    os.environ.setdefault("GPUMEMSHIM_PYTHON", sys.executable)
    try:
        sys.stdout.flush()
        os.execv(cli, [cli] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write("gpumemshim: error: cannot run %s: %s\n" % (cli, e.strerror))
        return 2


if __name__ == "__main__":
    sys.exit(main())

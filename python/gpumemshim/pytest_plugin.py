"""pytest plugin: GPU memory checks per test, under the gpumemshim shim.

    gpumemshim record -- python -m pytest --gpumemshim tests/

(installed with the package, ``pip install .``, it loads by itself through the ``pytest11`` entry
point; otherwise ``-p gpumemshim.pytest_plugin``, which names the same plugin). With ``--gpumemshim`` each test runs inside an expect_no_leak
region named ``pytest:<nodeid>``; after a test carrying one of the markers the plugin flushes the
trace, analyses it with ``gpumemshim report --format json`` and fails the test when

* ``@pytest.mark.no_gpu_leaks``: memory allocated during the test is still alive at its end (the
  failure lists each site's bytes and stack, innermost frame first);
* ``@pytest.mark.limit_gpu_memory("2 GB")``: live GPU memory of the process rose above the limit
  while the test ran (the peak is read from the report's timeline samples inside the test's region).

Without the shim ``--gpumemshim`` prints one warning line and the markers do nothing. The CLI is
GPUMEMSHIM_CLI, else ``bin/gpumemshim`` next to the shim's ``lib/``, else ``gpumemshim`` on PATH.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import gpumemshim

_REGION_PREFIX = "pytest:"
_TRACE_MAGIC = b"GMSTRACE"
_SHIM_NAME = "libgpumemshim.so"

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}


def parse_size(value):
    """Bytes from an int or a string like "2 GB" (decimal units), "1.5GiB" (binary) or "512 MiB"."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError("a memory limit must not be negative: %r" % (value,))
        return value
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(value))
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError("not a memory size: %r (use e.g. 2 GB, 512 MiB, 1000000)" % (value,))
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.2f %s" % (n, unit))
        n /= 1024.0
    return str(n)


def pytest_addoption(parser):
    group = parser.getgroup("gpumemshim", "GPU memory checks (gpumemshim)")
    group.addoption("--gpumemshim", action="store_true", default=False,
                    help="check GPU memory per test (no_gpu_leaks, limit_gpu_memory); run pytest under "
                         "`gpumemshim record -- python -m pytest ...`")


def pytest_configure(config):
    config.addinivalue_line("markers", "no_gpu_leaks: fail when GPU memory allocated in the test "
                                       "is still alive at its end (needs --gpumemshim)")
    config.addinivalue_line("markers", "limit_gpu_memory(size): fail when live GPU memory exceeds "
                                       "size (e.g. \"2 GB\") during the test (needs --gpumemshim)")
    if not config.getoption("gpumemshim"):
        return
    if not gpumemshim.active():
        sys.stderr.write("gpumemshim: warning: --gpumemshim without the shim: GPU memory markers are "
                         "not checked (run `gpumemshim record -- python -m pytest --gpumemshim ...`)\n")
        return
    config.pluginmanager.register(_Checker(), "gpumemshim-checker")


def _api():
    """The shim's C API (region markers and flush), found among the process's symbols."""
    import ctypes

    lib = ctypes.CDLL(None)
    for name in ("gpumemshim_region_begin", "gpumemshim_region_end"):
        getattr(lib, name).argtypes = [ctypes.c_char_p]
        getattr(lib, name).restype = None
    lib.gpumemshim_flush.argtypes = []
    lib.gpumemshim_flush.restype = None
    return lib


def _trace_path():
    """The trace this process writes: the open file that starts with the trace magic."""
    fd_dir = "/proc/self/fd"
    for fd in sorted(os.listdir(fd_dir), key=int):
        try:
            path = os.readlink(os.path.join(fd_dir, fd))
            if not path.startswith("/") or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                if f.read(len(_TRACE_MAGIC)) == _TRACE_MAGIC:
                    return path
        except OSError:
            continue
    return None


def _cli_path():
    env = os.environ.get("GPUMEMSHIM_CLI")
    if env:
        return env
    try:
        with open("/proc/self/maps", "r", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rstrip("\n").split(None, 5)[-1]
                if path.endswith("/" + _SHIM_NAME):
                    candidate = os.path.join(os.path.dirname(os.path.dirname(path)), "bin", "gpumemshim")
                    if os.access(candidate, os.X_OK):
                        return candidate
    except OSError:
        pass
    return shutil.which("gpumemshim")


def _cli_env():
    """The CLI must not record itself: the shim is dropped from LD_PRELOAD (a sanitizer runtime
    listed there stays) and recording is disabled."""
    env = dict(os.environ)
    kept = [p for p in env.get("LD_PRELOAD", "").replace(":", " ").split() if _SHIM_NAME not in p]
    if kept:
        env["LD_PRELOAD"] = " ".join(kept)
    else:
        env.pop("LD_PRELOAD", None)
    env["GPUMEMSHIM_DISABLE"] = "1"
    return env


def _is_pytest_machinery(frame):
    parts = re.split(r"[\\/]", frame.get("file") or "")
    return "_pytest" in parts or "pluggy" in parts


def _stack_text(stack, limit=12):
    """The frames down to the test function: pytest's and pluggy's own frames below it are cut."""
    for i, frame in enumerate(stack):
        if i > 0 and _is_pytest_machinery(frame):
            stack = stack[:i]
            break
    lines = []
    for i, frame in enumerate(stack[:limit]):
        where = "%s:%s" % (frame.get("file"), frame.get("line")) if frame.get("file") else frame.get("module", "")
        lines.append("    #%d %s %s" % (i, frame.get("function") or frame.get("pc", "??"), where))
    if len(stack) > limit:
        lines.append("    ... %d more frames" % (len(stack) - limit))
    return "\n".join(lines)


class _Checker:
    """Brackets every test with a region and checks the marked ones after their call phase."""

    def __init__(self):
        self._lib = _api()
        self._cli = _cli_path()

    def _region(self, item):
        return (_REGION_PREFIX + item.nodeid).encode("utf-8", "replace")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        name = self._region(item)
        self._lib.gpumemshim_region_begin(name)
        try:
            outcome = yield
        finally:
            self._lib.gpumemshim_region_end(name)
        no_leaks = item.get_closest_marker("no_gpu_leaks")
        limit = item.get_closest_marker("limit_gpu_memory")
        if (no_leaks is None and limit is None) or outcome.excinfo is not None:
            return
        problems = self._check(item, no_leaks is not None, limit)
        if problems:
            outcome.force_exception(pytest.fail.Exception("\n".join(problems), pytrace=False))

    def _report(self):
        self._lib.gpumemshim_flush()
        trace = _trace_path()
        if trace is None:
            raise RuntimeError("gpumemshim: the trace file of this process was not found")
        if self._cli is None:
            raise RuntimeError("gpumemshim: the gpumemshim CLI was not found (set GPUMEMSHIM_CLI)")
        r = subprocess.run([self._cli, "report", "--format", "json", "--quiet", trace],
                           capture_output=True, text=True, env=_cli_env())
        if r.returncode != 0:
            raise RuntimeError("gpumemshim report failed (%d): %s" % (r.returncode, r.stderr.strip()))
        return json.loads(r.stdout)

    def _check(self, item, no_leaks, limit_marker):
        report = self._report()
        region = _REGION_PREFIX + item.nodeid
        problems = []
        if no_leaks:
            leaks = [l for l in report.get("leaks", []) if l.get("region") == region and not l.get("suppressed")]
            if leaks:
                total = sum(l["bytes"] for l in leaks)
                problems.append("gpumemshim: %s (%d bytes) of GPU memory allocated in this test is still "
                                "alive at its end:" % (human(total), total))
                for l in leaks:
                    problems.append("  %d bytes in %d allocation(s) by %s:\n%s"
                                    % (l["bytes"], l["count"], l.get("api", "?"), _stack_text(l.get("stack", []))))
        if limit_marker is not None:
            if not limit_marker.args:
                raise pytest.UsageError("limit_gpu_memory needs a size, e.g. limit_gpu_memory(\"2 GB\")")
            limit = parse_size(limit_marker.args[0])
            peak = self._peak_in_region(report, region)
            if peak is not None and peak > limit:
                problems.append("gpumemshim: GPU memory peaked at %s (%d bytes) during this test, over the "
                                "limit of %s (%d bytes)" % (human(peak), peak, limit_marker.args[0], limit))
        return problems

    @staticmethod
    def _peak_in_region(report, region):
        """Highest live bytes of this process between the region's begin and end markers."""
        name = "expect_no_leak:" + region
        pid = os.getpid()
        begin = end = None
        for m in report.get("markers", []):
            if m.get("pid") != pid or m.get("name") != name:
                continue
            if m["kind"] == "range_push":
                begin, end = m["time_s"], None
            elif m["kind"] == "range_pop" and begin is not None:
                end = m["time_s"]
        if begin is None or end is None:
            return None
        for p in report.get("processes", []):
            if p.get("pid") != pid:
                continue
            samples = p.get("timeline", {}).get("samples", [])
            inside = [s["live_bytes"] for s in samples if begin <= s["t_s"] <= end]
            # The live bytes just before the region began still count at its start.
            before = [s["live_bytes"] for s in samples if s["t_s"] < begin]
            if before:
                inside.append(before[-1])
            return max(inside) if inside else 0
        return None

"""Allocations made from Python carry the Python frames (file, function, line)
merged with the native stack, read by the shim without the GIL."""
import sys

from conftest import FAKECUDA, SOURCES, site_line

APP = SOURCES / "python_alloc.py"
CUDART = FAKECUDA / "libcudart.so.13"
MIB = 1 << 20



def site_line_py(name):
    for number, text in enumerate(APP.read_text().splitlines(), start=1):
        if text.rstrip().endswith(f"# site: {name}"):
            return number
    raise AssertionError(f"no site {name!r} in python_alloc.py")


def leak_of(run, mode, **env):
    r = run.program([sys.executable, APP, CUDART, mode], **env)
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    [trace] = run.traces()
    report = run.report(trace)
    assert report["summary"]["allocations"] == 4 and report["summary"]["frees"] == 3
    [leak] = report["leaks"]
    assert leak["bytes"] == 5 * MIB
    return leak


def check_python_frames(stack, callers):
    top = stack[0]
    assert top["python"] is True, stack[:4]
    assert top["file"].endswith("python_alloc.py") and top["line"] == site_line_py("py alloc"), stack[:4]
    assert top["function"] == "allocate"
    for frame, (function, line) in zip(stack[1:], callers):
        assert frame["python"] is True, stack[:6]
        assert frame["function"] == function and frame["line"] == line, stack[:6]
        assert frame["file"].endswith("python_alloc.py")


def test_leak_stack_starts_at_the_python_line_with_its_callers(run):
    leak = leak_of(run, "main")
    check_python_frames(leak["stack"], [("build_model", site_line_py("py caller")),
                                        ("main", site_line_py("py main"))])
    module = leak["stack"][3]
    assert module["python"] is True and module["function"] == "<module>"


def test_native_only_stacks_have_no_python_frames(run):
    leak = leak_of(run, "main", GPUMEMSHIM_STACKS="native")
    assert leak["stack"], leak
    assert not any(f["python"] for f in leak["stack"])


def test_python_only_stacks(run):
    leak = leak_of(run, "main", GPUMEMSHIM_STACKS="python")
    check_python_frames(leak["stack"], [("build_model", site_line_py("py caller"))])
    assert all(f["python"] for f in leak["stack"])


def test_thread_started_from_python_gets_its_python_frames(run):
    leak = leak_of(run, "thread")
    check_python_frames(leak["stack"], [("build_model", site_line_py("py caller"))])
    # The thread's outermost Python frames are threading's bootstrap, not main().
    assert not any(f["function"] == "main" for f in leak["stack"] if f["python"])


def test_free_sites_and_repeated_stacks_stay_consistent(run):
    r = run.program([sys.executable, APP, CUDART, "main"])
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    stats = run.cli("stats", trace)
    assert stats.returncode == 0, stats.stderr
    assert "python code" in stats.stdout and "python stack" in stats.stdout

"""The pytest plugin (python/gpumemshim/pytest_plugin.py). A user's suite
(apps/pytest_suite) runs under `gpumemshim record -- python -m pytest -p gpumemshim.pytest_plugin
--gpumemshim`; the leaking test fails with its file:line, the clean one passes, limit_gpu_memory
fails over its limit and passes under it."""
import os
import pathlib
import re
import subprocess
import sys

from conftest import CLI, FAKECUDA, SOURCES, cli_env

SUITE = SOURCES / "pytest_suite" / "test_gpu_memory.py"
PYTHON_PKG = pathlib.Path(__file__).parents[2] / "python"


def leak_line():
    for number, text in enumerate(SUITE.read_text().splitlines(), start=1):
        if text.rstrip().endswith("# site: test leak"):
            return number
    raise AssertionError("no leak site")


def run_suite(tmp_path, under_shim=True, extra=()):
    env = cli_env()  # no shim in LD_PRELOAD (a sanitizer build's runtime stays there)
    env["PYTHONPATH"] = str(PYTHON_PKG)
    env["FAKE_CUDART"] = str(FAKECUDA / "libcudart.so.13")
    pytest_cmd = [sys.executable, "-m", "pytest", "-p", "gpumemshim.pytest_plugin", "-p", "no:cacheprovider",
                  "-rA", "--gpumemshim", str(SUITE), *extra]
    cmd = [str(CLI), "record", "-o", str(tmp_path / "pytest.%p.trace"), "--", *pytest_cmd] if under_shim else pytest_cmd
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def outcomes(stdout):
    """{test name: "PASSED" | "FAILED"} from pytest's -rA summary."""
    return {name: outcome for outcome, name in re.findall(r"^(PASSED|FAILED) \S+::(\w+)", stdout, re.M)}


def test_markers_fail_and_pass_the_right_tests_with_the_leaking_line(tmp_path):
    r = run_suite(tmp_path)
    result = outcomes(r.stdout)
    assert result == {"test_leaks": "FAILED", "test_clean": "PASSED", "test_over_limit": "FAILED",
                      "test_under_limit": "PASSED", "test_unmarked_leak_is_not_checked": "PASSED"}, \
        r.stdout + r.stderr
    assert r.returncode == 1
    # The leak's failure names its bytes and its line, the limit failure its peak and limit.
    assert f"test_gpu_memory.py:{leak_line()}" in r.stdout, r.stdout
    assert "3145728 bytes" in r.stdout
    # The limit is on the process's live GPU memory: test_leaks' 3 MiB are still alive under the 6 MiB.
    assert re.search(r"GPU memory peaked at 9\.00 MiB \(9437184 bytes\).*limit of 4 MB \(4000000 bytes\)", r.stdout), \
        r.stdout
    assert "pluggy/_callers.py" not in r.stdout and "_pytest/python.py" not in r.stdout  # stacks end at the test
    assert len(list(tmp_path.glob("pytest.*.trace"))) == 1


def test_without_the_shim_one_warning_and_the_markers_are_no_ops(tmp_path):
    r = run_suite(tmp_path, under_shim=False)
    assert r.returncode == 0, r.stdout + r.stderr
    warnings = [line for line in r.stderr.splitlines() if line.startswith("gpumemshim:")]
    assert len(warnings) == 1 and "without the shim" in warnings[0], r.stderr
    assert set(outcomes(r.stdout).values()) == {"PASSED"}

"""The README's "First use" commands, run as written: `gpumemshim` and `python` on PATH, `./train`
the leaky demo program on the fake CUDA, `tests/` a user's suite with a leaking test. The plugin
comes from the source tree here (PYTEST_PLUGINS), from the pytest11 entry point when installed
(tests/install/test_wheel.py)."""
import os
import pathlib
import re
import shutil
import subprocess
import sys

from conftest import BUILD, CLI, FAKECUDA, SOURCES, base_env

ROOT = pathlib.Path(__file__).parents[2]


def first_use_commands():
    text = (ROOT / "README.md").read_text()
    section = text.split("## First use", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_first_use_commands_run_as_written(tmp_path):
    commands = first_use_commands()
    assert [c.split()[1] for c in commands] == ["doctor", "record", "report", "check", "record"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    runtime = os.environ.get("GPUMEMSHIM_TEST_PRELOAD")
    if runtime:
        # Sanitizer builds: the CLI keeps their runtime first in what `record` preloads; the shell
        # itself must not load it (TSan's runtime crashes an uninstrumented bash).
        wrapper = bin_dir / "gpumemshim"
        wrapper.write_text(f'#!/bin/sh\nLD_PRELOAD={runtime} exec {CLI} "$@"\n')
        wrapper.chmod(0o755)
    else:
        (bin_dir / "gpumemshim").symlink_to(CLI)
    (bin_dir / "python").symlink_to(sys.executable)
    work = tmp_path / "work"
    (work / "tests").mkdir(parents=True)
    (work / "train").symlink_to(BUILD / "examples" / "leaky_app")
    shutil.copy(SOURCES / "pytest_suite" / "test_gpu_memory.py", work / "tests")
    env = base_env(FAKE_CUDART=FAKECUDA / "libcudart.so.13", PYTHONPATH=ROOT / "python",
                   PYTEST_PLUGINS="gpumemshim.pytest_plugin")
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    # check fails on the planted leak, and so does the suite's leaking test; the rest succeed.
    expected = {"doctor": 0, "record": 0, "report": 0, "check": 1}
    for i, command in enumerate(commands):
        r = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env,
                           cwd=work, timeout=300)
        want = 1 if "pytest" in command else expected[command.split()[1]]
        assert r.returncode == want, f"{command}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        if command.startswith("gpumemshim record -- ./train"):
            assert len(list(work.glob("gpumemshim.*.trace"))) == 1, r.stderr
        if "pytest" in command:
            assert re.search(r"FAILED \S+::test_leaks", r.stdout + r.stderr), r.stdout

"""`pip wheel .` from a clean copy of the sources (the tracked files only), installed into a fresh
venv: the gpumemshim command and `python -m gpumemshim`, `record` of a leaky program on the fake
CUDA and `check` of its trace, and `pytest --gpumemshim` through the plugin's pytest11 entry point
(no -p), with no PytestAssertRewriteWarning. pip fetches scikit-build-core from PyPI: without a
network this fails, unless GPUMEMSHIM_SKIP_WHEEL_TEST=1 says to skip it."""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

BUILD = pathlib.Path(os.environ["GPUMEMSHIM_BUILD_DIR"])
SOURCE = pathlib.Path(os.environ["GPUMEMSHIM_SOURCE_DIR"])
FAKECUDA = BUILD / "tests" / "fakecuda"
LEAKY_APP = BUILD / "examples" / "leaky_app"
SUITE = SOURCE / "tests" / "integration" / "apps" / "pytest_suite" / "test_gpu_memory.py"

if os.environ.get("GPUMEMSHIM_SKIP_WHEEL_TEST") == "1":
    pytest.skip("GPUMEMSHIM_SKIP_WHEEL_TEST=1", allow_module_level=True)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUMEMSHIM_", "FAKECUDA_", "PYTHON", "PIP_"))
           and k not in ("LD_PRELOAD", "VIRTUAL_ENV")}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(cmd, ok=True, **kw):
    kw.setdefault("timeout", 1500)
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if ok:
        assert r.returncode == 0, f"{cmd}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r


def tracked_copy(dest):
    """The tracked files of the source tree, as they are now: what a clean clone holds."""
    listed = subprocess.run(["git", "-C", str(SOURCE), "ls-files", "-z"], capture_output=True)
    assert listed.returncode == 0, f"the wheel test copies git's tracked files: {listed.stderr!r}"
    for name in listed.stdout.decode().split("\0"):
        if not name or not (SOURCE / name).exists():
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(SOURCE / name, dest / name, follow_symlinks=False)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    tracked_copy(src)
    env = root / "venv"
    # The system's packages stay visible for pytest itself; gpumemshim comes only from the wheel.
    run([sys.executable, "-m", "venv", "--system-site-packages", env])
    python = env / "bin" / "python"
    run([python, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-w",
         root / "dist", src], env=clean_env(CMAKE_BUILD_PARALLEL_LEVEL=2), cwd=root)
    wheels = list((root / "dist").glob("gpumemshim-*.whl"))
    assert len(wheels) == 1, wheels
    run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check",
         wheels[0]], env=clean_env())
    return env


def venv_env(venv, **extra):
    return clean_env(PATH=f"{venv}/bin:{os.environ.get('PATH', '/usr/bin:/bin')}",
                     VIRTUAL_ENV=venv, **extra)


def package_dir(venv):
    r = run([venv / "bin" / "python", "-c", "import gpumemshim, os; "
             "print(os.path.dirname(gpumemshim.__file__))"], env=venv_env(venv), cwd=venv)
    return pathlib.Path(r.stdout.strip())


def project_version():
    text = (SOURCE / "CMakeLists.txt").read_text()
    return re.search(r"project\(gpumemshim VERSION ([0-9.]+)", text).group(1)


def test_the_command_and_python_m_give_the_projects_version(venv):
    want = f"gpumemshim {project_version()}\n"
    assert run(["gpumemshim", "--version"], env=venv_env(venv)).stdout == want
    assert run([venv / "bin" / "python", "-m", "gpumemshim", "--version"],
               env=venv_env(venv)).stdout == want
    r = run([venv / "bin" / "python", "-c", "import gpumemshim; print(gpumemshim.__version__)"],
            env=venv_env(venv), cwd=venv)
    assert r.stdout == f"{project_version()}\n"


def test_the_shim_and_the_bridge_are_inside_the_package(venv):
    pkg = package_dir(venv)
    assert pkg.parent.name == "site-packages"
    assert (pkg / "lib" / "libgpumemshim.so").is_file()
    assert (pkg / "lib" / "gpumemshim-python" / "sitecustomize.py").is_file()
    assert (pkg / "lib" / "libgpumemshim_torch.so").is_file() == \
        (BUILD / "lib" / "libgpumemshim_torch.so").is_file()
    r = run([venv / "bin" / "python", "-m", "gpumemshim", "doctor"], env=venv_env(venv))
    assert re.search(rf"^shim: +{re.escape(str((pkg / 'lib' / 'libgpumemshim.so').resolve()))}$",
                     r.stdout, re.M), r.stdout
    # doctor asks the venv's Python, the one the command runs on
    assert re.search(rf"^Python: +\S+ \({re.escape(str(venv))}/bin/python3?\)$", r.stdout, re.M), \
        r.stdout


def test_record_and_check_a_leaky_program(venv, tmp_path):
    env = venv_env(venv, LD_LIBRARY_PATH=FAKECUDA)
    r = run(["gpumemshim", "record", "-o", tmp_path / "leaky.%p.trace", "--", LEAKY_APP],
            env=env, cwd=tmp_path)
    traces = list(tmp_path.glob("leaky.*.trace"))
    assert len(traces) == 1, r.stderr
    assert f"gpumemshim: trace: {traces[0]}" in r.stderr
    check = run(["gpumemshim", "check", traces[0]], ok=False, env=env, cwd=tmp_path)
    assert check.returncode == 1, check.stdout + check.stderr
    assert "leak" in check.stdout


def outcomes(stdout):
    return {name: outcome for outcome, name in re.findall(r"^(PASSED|FAILED) \S+::(\w+)", stdout, re.M)}


@pytest.mark.parametrize("plugin_arg", [[], ["-p", "gpumemshim.pytest_plugin"]],
                         ids=["entry-point", "also-named-with-p"])
def test_pytest_gpumemshim_through_the_entry_point(venv, tmp_path, plugin_arg):
    env = venv_env(venv, FAKE_CUDART=FAKECUDA / "libcudart.so.13")
    r = run(["gpumemshim", "record", "-o", tmp_path / "pytest.%p.trace", "--",
             venv / "bin" / "python", "-m", "pytest", "-p", "no:cacheprovider", *plugin_arg, "-rA",
             "--gpumemshim", SUITE], ok=False, env=env, cwd=tmp_path)
    out = r.stdout + r.stderr
    result = outcomes(r.stdout)
    assert result.get("test_leaks") == "FAILED", out
    assert result.get("test_clean") == "PASSED", out
    assert r.returncode == 1, out
    assert "3145728 bytes" in r.stdout  # the leak's failure, from the plugin's analysis
    assert "PytestAssertRewriteWarning" not in out
    assert "already imported" not in out

"""`cmake --install build --prefix P`: the CLI, the shim, the marker header and a CMake package; a
user's project (consumer/) finds it with find_package(gpumemshim), builds against
gpumemshim::markers and runs under P/bin/gpumemshim record, whose trace holds its step markers."""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

BUILD = pathlib.Path(os.environ["GPUMEMSHIM_BUILD_DIR"])
SOURCE = pathlib.Path(os.environ["GPUMEMSHIM_SOURCE_DIR"])
FAKE_CUDART = BUILD / "tests" / "fakecuda" / "libcudart.so.13"


def run(cmd, **kw):
    kw.setdefault("timeout", 600)
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{cmd}\n{r.stdout}\n{r.stderr}"
    return r


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUMEMSHIM_", "FAKECUDA_")) and k != "LD_PRELOAD"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = tmp_path_factory.mktemp("prefix")
    run(["cmake", "--install", BUILD, "--prefix", p])
    return p


def test_install_lays_out_the_cli_the_shim_the_header_and_the_package(prefix):
    assert os.access(prefix / "bin" / "gpumemshim", os.X_OK)
    assert (prefix / "lib" / "libgpumemshim.so").is_file()
    assert (prefix / "lib" / "gpumemshim-python" / "sitecustomize.py").is_file()
    assert (prefix / "include" / "gpumemshim" / "markers.h").is_file()
    cmake_dir = prefix / "lib" / "cmake" / "gpumemshim"
    for name in ("gpumemshimConfig.cmake", "gpumemshimConfigVersion.cmake", "gpumemshimTargets.cmake"):
        assert (cmake_dir / name).is_file(), name
    # The bridge is installed when this build has one.
    assert (prefix / "lib" / "libgpumemshim_torch.so").is_file() == \
        (BUILD / "lib" / "libgpumemshim_torch.so").is_file()


def test_the_installed_cli_finds_the_installed_shim(prefix):
    r = run([prefix / "bin" / "gpumemshim", "doctor"], env=clean_env(GPUMEMSHIM_PYTHON="/nonexistent"))
    shim_line = next(line for line in r.stdout.splitlines() if line.startswith("shim:"))
    assert shim_line.split(None, 1)[1] == str((prefix / "lib" / "libgpumemshim.so").resolve())


def test_a_find_package_consumer_builds_and_records_its_steps(prefix, tmp_path):
    build = tmp_path / "consumer-build"
    run(["cmake", "-S", SOURCE / "tests" / "install" / "consumer", "-B", build, "-G", "Ninja",
         f"-DCMAKE_PREFIX_PATH={prefix}"], env=clean_env())
    run(["cmake", "--build", build], env=clean_env())
    assert (build / "shim_path.txt").read_text() == str(prefix / "lib" / "libgpumemshim.so")
    consumer = build / "consumer"

    # Without the shim the markers do nothing and the program runs as usual.
    plain = run([consumer, FAKE_CUDART], env=clean_env(), cwd=tmp_path)
    assert plain.stdout == "shim active: 0\n"
    assert not list(tmp_path.glob("*.trace"))

    rec = subprocess.run([prefix / "bin" / "gpumemshim", "record", "-o", tmp_path / "c.%p.trace",
                          "--", consumer, FAKE_CUDART], capture_output=True, text=True,
                         env=clean_env(), cwd=tmp_path, timeout=120)
    assert rec.returncode == 0, rec.stderr
    assert rec.stdout == "shim active: 1\n"
    traces = list(tmp_path.glob("c.*.trace"))
    assert len(traces) == 1, rec.stderr
    report = json.loads(run([prefix / "bin" / "gpumemshim", "report", "--format", "json",
                             traces[0]], env=clean_env()).stdout)
    markers = report["markers"]
    steps = [m for m in markers if m.get("kind") == "step"]
    assert [m.get("name") for m in steps] == ["consumer.step"] * 3, markers
    assert any(m.get("kind") == "mark" and m.get("name") == "consumer.done" for m in markers), markers
    # The step-2 buffer, left alive in its expect_no_leak region, is the one leak.
    leaks = [l for l in report["leaks"] if l["kind"] == "leak"]
    assert [l["bytes"] for l in leaks] == [1 << 20], report["leaks"]


def readme_cmake_block():
    """The README's CMake install commands, as written."""
    text = (SOURCE / "README.md").read_text()
    for block in text.split("```")[1::2]:
        lines = [line.strip() for line in block.strip().splitlines()]
        if any(line.startswith("cmake --install build-install") for line in lines):
            return lines
    raise AssertionError("no `cmake --install build-install` block in the README")


def test_the_readmes_cmake_commands_install_as_written(tmp_path):
    """The three commands of the README's Install section, run from the source folder with only the
    build folder and the prefix moved under a temporary directory."""
    build, prefix = tmp_path / "build-install", tmp_path / "opt-gpumemshim"
    env = clean_env()
    if shutil.which("ccache"):  # CMake's default launcher: the commands stay as written
        env["CMAKE_CXX_COMPILER_LAUNCHER"] = env["CMAKE_C_COMPILER_LAUNCHER"] = "ccache"
    commands = readme_cmake_block()
    assert len(commands) == 3, commands
    for command in commands:
        command = command.replace("build-install", str(build)).replace("/opt/gpumemshim", str(prefix))
        r = subprocess.run(command, shell=True, cwd=SOURCE, env=env, capture_output=True, text=True,
                           timeout=1500)
        assert r.returncode == 0, f"{command}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert not (build / "tests").exists()  # GPUMEMSHIM_BUILD_TESTS=OFF: the package alone
    assert os.access(prefix / "bin" / "gpumemshim", os.X_OK)
    assert (prefix / "include" / "gpumemshim" / "markers.h").is_file()
    assert (prefix / "lib" / "cmake" / "gpumemshim" / "gpumemshimConfig.cmake").is_file()
    r = run([prefix / "bin" / "gpumemshim", "doctor"], env=clean_env(GPUMEMSHIM_PYTHON="/nonexistent"))
    shim_line = next(line for line in r.stdout.splitlines() if line.startswith("shim:"))
    assert shim_line.split(None, 1)[1] == str((prefix / "lib" / "libgpumemshim.so").resolve())

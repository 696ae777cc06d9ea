"""The CLI's own surface: --version, doctor, a mistyped command, and the help of every command."""
import ctypes.util
import os
import pathlib
import re
import subprocess
import sys

from conftest import CLI, FAKECUDA, SHIM, cli_env

ROOT = pathlib.Path(__file__).parents[2]


def cli(*args, env=None, cwd=None):
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=120,
                          env=env or cli_env(), cwd=cwd)


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(gpumemshim VERSION ([0-9.]+)", text).group(1)


def test_version_is_the_projects():
    r = cli("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"gpumemshim {project_version()}\n"


def test_a_mistyped_command_gets_the_nearest_one():
    r = cli("reprot", "x.trace")
    assert r.returncode == 2
    assert r.stderr == "gpumemshim: error: unknown command 'reprot'; did you mean 'report'?\n"
    assert r.stdout == ""
    assert "did you mean 'doctor'?" in cli("doctr").stderr


def test_an_unknown_command_far_from_all_lists_them():
    r = cli("frobnicate")
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpumemshim: error: unknown command 'frobnicate'")
    assert "did you mean" not in r.stderr
    for command in ("record", "report", "check", "diff", "export", "stats", "doctor"):
        assert command in lines[0]


def commands():
    out = cli("--help").stdout
    section = out.split("Subcommands:", 1)[1]
    return re.findall(r"^  (\w+) ", section, re.M)


def test_every_help_fits_the_terminal_with_one_option_per_line():
    names = commands()
    assert set(names) == {"record", "report", "check", "diff", "export", "stats", "doctor"}
    for args in [[]] + [[name] for name in names]:
        r = cli(*args, "--help")
        assert r.returncode == 0, (args, r.stderr)
        lines = r.stdout.splitlines()
        assert all(len(line) <= 100 for line in lines), (args, [l for l in lines if len(l) > 100])
        assert ":{" not in r.stdout, args  # no value list glued to an option's name
        options = [line for line in lines if re.match(r"^  -", line)]
        assert options, args
        for line in options:
            spec = line.split()[0]
            # one option (short and long form of it at most) at the start of each line
            assert re.fullmatch(r"(-\w,)?--?[\w-]+", spec), (args, line)
            assert not re.search(r"\s--[a-z]", line[len(spec) + 2:]), (args, line)


def test_record_help_names_its_values():
    out = cli("record", "--help").stdout
    assert re.search(r"^  -o,--output PATTERN +trace path pattern", out, re.M), out
    assert re.search(r"^  --stacks KINDS +native,python \| python \| native \| none$", out, re.M), out


def doctor(tmp_path, output=None, python=None, library_path="", bridge=None, **extra):
    env = cli_env()
    env["LD_LIBRARY_PATH"] = library_path
    env["GPUMEMSHIM_PYTHON"] = python or sys.executable
    if output is not None:
        env["GPUMEMSHIM_OUTPUT"] = str(output)
    if bridge is not None:
        env["GPUMEMSHIM_TORCH_BRIDGE"] = str(bridge)
    env.update({k: str(v) for k, v in extra.items()})
    r = cli("doctor", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr == ""
    return r.stdout


def field(out, key):
    m = re.search(rf"^{re.escape(key)}: +(.*)$", out, re.M)
    assert m, (key, out)
    return m.group(1)


def test_doctor_without_cuda_names_the_shim_and_the_output(tmp_path):
    out = doctor(tmp_path, output=tmp_path / "runs" / "t.%p.trace")
    assert out.splitlines()[0] == f"gpumemshim {project_version()}"
    assert field(out, "shim") == str(SHIM.resolve())
    if not ctypes.util.find_library("cuda"):  # a machine with a real driver says which
        assert field(out, "CUDA driver").startswith("no CUDA driver found")
    assert field(out, "GPUs").startswith("not listed: no NVML")
    # GPUMEMSHIM_OUTPUT resolved, its directory missing: not writable (the shim makes no folders).
    assert field(out, "traces").startswith(f"{tmp_path}/runs/t.%p.trace (GPUMEMSHIM_OUTPUT")
    assert field(out, "output dir") == f"{tmp_path}/runs: not writable (No such file or directory)"


def test_doctor_default_output_is_the_working_directory(tmp_path):
    out = doctor(tmp_path)
    host = os.uname().nodename
    assert field(out, "traces").startswith(f"{tmp_path}/gpumemshim.{host}.%p.trace (the default")
    assert field(out, "output dir") == f"{tmp_path}: writable"


def test_doctor_with_the_fake_driver_and_nvml_lists_the_gpus(tmp_path):
    out = doctor(tmp_path, library_path=f"{FAKECUDA}:{FAKECUDA}/nvml", FAKECUDA_DEVICES=2)
    assert field(out, "CUDA driver") == f"{FAKECUDA}/libcuda.so.1 (supports CUDA 13.0)"
    assert field(out, "CUDA runtime").startswith(f"{FAKECUDA}/libcudart.so")
    assert field(out, "GPUs") == "2 (NVML)"
    assert re.search(r"^  nvml 0: FakeCUDA Device 1, 80\.0 GiB", out, re.M), out
    assert re.search(r"^  nvml 1: FakeCUDA Device 0, 80\.0 GiB", out, re.M), out


def fake_torch(tmp_path, version):
    site = tmp_path / f"site-{version}"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("raise ImportError('doctor must not import torch')\n")
    (site / "torch" / "version.py").write_text(f"__version__ = '{version}'\n")
    return site


def fake_bridge(tmp_path, version):
    # What doctor reads from a bridge: its tagged version string (torch_hooks/bridge.cpp).
    path = tmp_path / "libgpumemshim_torch.so"
    path.write_bytes(b"\x7fELF\0junk\0gpumemshim-torch-version=" + version.encode() + b"\0more\0")
    return path


def test_doctor_says_whether_the_torch_bridge_fits_the_pythons_torch(tmp_path):
    bridge = fake_bridge(tmp_path, "2.11.0+cu130")
    fits = doctor(tmp_path, bridge=bridge, PYTHONPATH=fake_torch(tmp_path, "2.11.0+cu130"))
    assert field(fits, "torch bridge") == f"{bridge} (built for torch 2.11.0+cu130)"
    assert field(fits, "Python").startswith(f"{sys.version.split()[0]} (")
    assert field(fits, "  torch") == "2.11.0+cu130; the torch bridge fits: tensor-level events"
    other = doctor(tmp_path, bridge=bridge, PYTHONPATH=fake_torch(tmp_path, "2.10.0"))
    assert field(other, "  torch") == ("2.10.0; the torch bridge was built for torch 2.11.0+cu130: "
                                       "it will not be loaded (runtime-level events only)")


def test_doctor_without_python_still_answers(tmp_path):
    out = doctor(tmp_path, python=tmp_path / "no-such-python")
    assert field(out, "Python") == f"not asked: {tmp_path}/no-such-python not found"
    assert field(out, "output dir") == f"{tmp_path}: writable"

"""Shared helpers for the integration tests: run programs on the fake CUDA under the shim and read
what the gpumemshim CLI says about their traces."""
import json
import os
import pathlib
import subprocess

import pytest

BUILD = pathlib.Path(os.environ.get("GPUMEMSHIM_BUILD_DIR", pathlib.Path(__file__).parents[2] / "build"))
SHIM = BUILD / "lib" / "libgpumemshim.so"
CLI = BUILD / "bin" / "gpumemshim"
FAKECUDA = BUILD / "tests" / "fakecuda"
SCENARIOS = BUILD / "tests" / "integration" / "cuda_scenarios"
SLOW_WRITES = BUILD / "tests" / "integration" / "libslow_writes.so"
STATIC_LIKE = BUILD / "tests" / "integration" / "static_cudart_like"
VMM = BUILD / "tests" / "integration" / "vmm_scenarios"
NVTX_APP = BUILD / "tests" / "integration" / "nvtx_app"
SOURCES = pathlib.Path(__file__).parent / "apps"


def site_line(name, source="cuda_scenarios.cpp"):
    """The line of the source marked `// site: NAME`."""
    for number, text in enumerate((SOURCES / source).read_text().splitlines(), start=1):
        if text.rstrip().endswith(f"// site: {name}"):
            return number
    raise AssertionError(f"no site {name!r} in {source}")


def base_env(**extra):
    env = dict(os.environ)
    for key in list(env):
        if key.startswith(("GPUMEMSHIM_", "FAKECUDA_")) or key == "LD_PRELOAD":
            del env[key]
    env["LD_LIBRARY_PATH"] = str(FAKECUDA)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def shim_preload(*before_shim):
    """LD_PRELOAD for a program under the shim, with before_shim's libraries ahead of it.
    Sanitizer builds load their runtime first."""
    runtime = os.environ.get("GPUMEMSHIM_TEST_PRELOAD")
    return " ".join(str(p) for p in ([runtime] if runtime else []) + [*before_shim, SHIM])


def cli_env():
    """The CLI's own environment: in sanitizer builds `record` must keep the runtime first."""
    runtime = os.environ.get("GPUMEMSHIM_TEST_PRELOAD")
    return base_env(LD_PRELOAD=runtime) if runtime else base_env()


class Run:
    def __init__(self, tmp_path):
        self.dir = tmp_path

    def program(self, args, shim=True, timeout=120, before_shim=(), **env):
        e = base_env(**env)
        if shim:
            e["LD_PRELOAD"] = shim_preload(*before_shim)
            e.setdefault("GPUMEMSHIM_OUTPUT", str(self.dir / "app.%p.trace"))
        return subprocess.run([str(a) for a in args], env=e, capture_output=True, text=True,
                              timeout=timeout, cwd=self.dir)

    def traces(self):
        return sorted(self.dir.glob("*.trace*"))

    def cli(self, *args, timeout=120):
        return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, cwd=self.dir, env=cli_env())

    def report(self, *traces):
        r = self.cli("report", "--format", "json", *traces)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


@pytest.fixture
def run(tmp_path):
    return Run(tmp_path)


def frame_at(leak, file_name, line):
    """The first frame of a leak's stack, checked to be file_name:line."""
    top = leak["stack"][0]
    assert top["file"].endswith(file_name) and top["line"] == line, leak["stack"][:3]
    return top

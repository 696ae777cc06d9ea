"""H200 scenarios of issue 23 under the shim: JAX in both allocator modes (growth pinned to its
line with the platform allocator; the preallocated pool named with what it hides), a clean JAX
loop, CuPy's pool (kept arrays vs a pool-cached twin that is no leak, and a pool that fills the
device), and cuBLAS + NCCL named in the by-library table. A framework the image lacks is reported
as SKIP. Called by run_all.sh: check_frameworks.py WORK OUT"""
import importlib.util
import json
import sys

from gpu_checks import check, finish, here, report, run, site_line


def have(module):
    return importlib.util.find_spec(module) is not None


def frames_at(stack, script, line):
    return any(f.get("python") and f.get("file", "").endswith(script) and f.get("line") == line for f in stack)


def growth_at(rep, script, line):
    return [g for g in rep.get("growth", []) if frames_at(g["stack"], script, line)]


def advice(rep):
    return [a["id"] for a in rep.get("recommendations", [])]


def show(rep):
    p = rep["processes"][0]
    print("   libraries: " + json.dumps([(l["name"], l["at_peak_bytes"], l["end_bytes"], l["top_site"])
                                         for l in p.get("libraries", [])])[:1500])
    print("   frameworks: " + json.dumps(p.get("frameworks", []))[:800])
    print("   growth: " + json.dumps([(g["bytes_per_step"], g.get("unit"), [(f.get("file", "")[-30:], f.get("line"))
                                                                      for f in g["stack"][:3]])
                                    for g in rep.get("growth", [])])[:1500])
    print("   leaks: " + json.dumps([(l["kind"], l["bytes"], l["count"], l["stack"][:1]) for l in rep["leaks"]])[:1500])
    print("   advice: " + json.dumps(advice(rep)))


jax_script = here / "jax_loop.py"
platform = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}
if not have("jax"):
    print("SKIP jax: not installed")
else:
    for name, mode, env in (("jax_platform_keep", "keep", platform), ("jax_platform_clean", "clean", platform),
                            ("jax_default_keep", "keep", {})):
        r, traces = run(name, [sys.executable, jax_script, mode], env)
        check(f"{name}: ran", r.returncode == 0 and traces, r.stderr[-1500:])
        rep = report(name, traces) if traces else None
        if not rep:
            continue
        show(rep)
        modes = {m["framework"]: m for m in rep["processes"][0].get("frameworks", [])}
        if name == "jax_platform_keep":
            line = site_line(jax_script, "jax_update")
            check(f"{name}: growth pinned to jax_loop.py:{line}", bool(growth_at(rep, "jax_loop.py", line)),
                  json.dumps(rep.get("growth", []))[:1500])
            check(f"{name}: platform allocator said", modes.get("JAX", {}).get("mode", "").startswith("platform"))
        elif name == "jax_platform_clean":
            check(f"{name}: no growth", not rep.get("growth"), json.dumps(rep.get("growth"))[:1500])
            check(f"{name}: no leak", rep["summary"]["leaked_bytes"] == 0, str(rep["summary"]["leaked_bytes"]))
        else:
            m = modes.get("JAX", {})
            check(f"{name}: preallocated pool said with what it hides",
                  m.get("mode", "").startswith("preallocated pool") and m.get("cannot_show"), json.dumps(m))
            check(f"{name}: jax-platform-allocator advice", "jax-platform-allocator" in advice(rep))

cupy_script = here / "cupy_twin.py"
if not have("cupy"):
    print("SKIP cupy: not installed")
else:
    for mode in ("keep", "release", "fill"):
        name = f"cupy_{mode}"
        r, traces = run(name, [sys.executable, cupy_script, mode])
        check(f"{name}: ran", r.returncode == 0 and traces, r.stderr[-1500:])
        rep = report(name, traces) if traces else None
        if not rep:
            continue
        show(rep)
        if mode == "keep":
            line = site_line(cupy_script, "cupy_result")  # the kept results; `a` is reused by the pool
            check(f"{name}: growth pinned to cupy_twin.py:{line}", bool(growth_at(rep, "cupy_twin.py", line)))
        elif mode == "release":
            check(f"{name}: the pool's blocks are cached, not leaked",
                  rep["summary"]["leaked_bytes"] == 0 and any(l["kind"] == "cached" for l in rep["leaks"]),
                  json.dumps([(l["kind"], l["bytes"]) for l in rep["leaks"]]))
            check(f"{name}: no growth", not rep.get("growth"))
        else:
            check(f"{name}: cupy-free-all-blocks advice", "cupy-free-all-blocks" in advice(rep), r.stdout)

if not have("torch"):
    print("SKIP libs_nccl: no torch")
else:
    r, traces = run("libs_nccl", [sys.executable, here / "libs_nccl.py"])
    check("libs_nccl: ran", r.returncode == 0 and traces, r.stderr[-1500:])
    rep = report("libs_nccl", traces) if traces else None
    if rep:
        show(rep)
        names = [l["name"] for l in rep["processes"][0].get("libraries", [])]
        check("libs_nccl: NCCL's memory named", "NCCL" in names, str(names))
        check("libs_nccl: PyTorch's allocator named", "PyTorch (caching allocator)" in names, str(names))

finish()

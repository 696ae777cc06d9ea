"""Runs the H200 scenarios under the shim and checks what the reports say. Prints one PASS/FAIL line
per check and exits 1 if any failed. Called by run_all.sh."""
import json
import os
import subprocess
import sys
import time

from gpu_checks import MIB, check, finish, here, report, run, shim, site_line, work


def api_counts(rep):
    return rep["summary"]["by_api"]


# 1, 2: nvcc-built programs, static and shared cudart.
src = here / "leak_known_line.cu"
line = site_line(src, "make_buffer")
for cudart in ("static", "shared"):
    exe = work / f"leak_{cudart}"
    subprocess.run(["nvcc", "-g", "-O1", f"--cudart={cudart}", "-o", exe, src], check=True)
    for mode in ("leak", "clean"):
        name = f"nvcc_{cudart}_{mode}"
        bare, _ = run(name + "_bare", [exe, mode], shim_on=False)
        r, traces = run(name, [exe, mode])
        check(f"{name}: output unchanged", r.returncode == bare.returncode and r.stdout == bare.stdout
              and r.stderr == bare.stderr, repr((r.stdout, bare.stdout, r.stderr)))
        rep = report(name, traces) if traces else None
        check(f"{name}: one trace", len(traces) == 1 and rep is not None, str(traces))
        if not rep:
            continue
        print(f"   apis: {api_counts(rep)}")
        if mode == "leak":
            leaks = rep["leaks"]
            ok = len(leaks) == 1 and leaks[0]["bytes"] == 48 * MIB and leaks[0]["count"] == 3
            check(f"{name}: 48 MiB in 3 leaks", ok, json.dumps(leaks)[:600])
            if leaks:
                top = leaks[0]["stack"][0] if leaks[0]["stack"] else {}
                check(f"{name}: leak at leak_known_line.cu:{line}",
                      top.get("file", "").endswith("leak_known_line.cu") and top.get("line") == line,
                      json.dumps(leaks[0]["stack"][:4]))
            check(f"{name}: 10 allocations seen", rep["summary"]["allocations"] >= 10,
                  str(rep["summary"]))
        else:
            check(f"{name}: clean", rep["leaks"] == [] or all(l["memory"] != "device" for l in rep["leaks"]),
                  json.dumps(rep["leaks"])[:400])

# 3: PyTorch with three allocator configurations.
script = here / "torch_alloc.py"
for name, conf in (("torch_default", ""), ("torch_expandable", "expandable_segments:True"),
                   ("torch_async", "backend:cudaMallocAsync")):
    env = {"PYTORCH_CUDA_ALLOC_CONF": conf} if conf else {}
    bare, _ = run(name + "_bare", [sys.executable, script, str(work / f"{name}_bare.json")], env, shim_on=False)
    r, traces = run(name, [sys.executable, script, str(work / f"{name}.json")], env)
    check(f"{name}: output unchanged", r.returncode == bare.returncode == 0 and r.stdout == bare.stdout,
          repr((r.stdout[-300:], r.stderr[-800:])))
    rep = report(name, traces) if traces else None
    check(f"{name}: trace", rep is not None, str(traces))
    if not rep:
        continue
    stats = json.loads((work / f"{name}.json").read_text())
    apis = api_counts(rep)
    print(f"   apis: {apis}")
    print(f"   torch: { {k: v for k, v in stats.items() if k.startswith('segment.all') or k.startswith('num_')} }")
    def n(api, key="allocations"):
        return apis.get(api, {}).get(key, 0)
    if name == "torch_default":
        check(f"{name}: cudaMalloc count == segment.all.allocated",
              n("cudaMalloc") == stats.get("segment.all.allocated"), f"{n('cudaMalloc')} vs {stats.get('segment.all.allocated')}")
        check(f"{name}: cudaFree count == segment.all.freed",
              n("cudaFree", "frees") == stats.get("segment.all.freed"), f"{n('cudaFree', 'frees')} vs {stats.get('segment.all.freed')}")
    elif name == "torch_expandable":
        check(f"{name}: cuMemCreate seen", n("cuMemCreate") > 0, str(apis))
        check(f"{name}: cuMemMap seen", n("cuMemMap") > 0, str(apis))
        check(f"{name}: every physical handle released after empty_cache",
              n("cuMemCreate") == n("cuMemRelease", "frees"), str(apis))
    else:
        check(f"{name}: cudaMallocAsync seen", n("cudaMallocAsync") >= 100, str(apis))
        check(f"{name}: every async allocation freed",
              n("cudaMallocAsync") == n("cudaFreeAsync", "frees"), str(apis))

# 5: Python frames from inside PyTorch: the segments' leak is pinned to the script line.
src_py = here / "torch_python_site.py"
py_line = site_line(src_py, "python keep")
bare, _ = run("torch_python_bare", [sys.executable, src_py], shim_on=False)
r, traces = run("torch_python", [sys.executable, src_py])
check("torch_python: output unchanged", r.returncode == bare.returncode == 0 and r.stdout == bare.stdout,
      repr((r.stdout, r.stderr[-800:])))
rep = report("torch_python", traces) if traces else None
if rep:
    big = [l for l in rep["leaks"] if l["memory"] == "device" and l["bytes"] >= 4 * 64 * MIB]
    top = big[0]["stack"][0] if big and big[0]["stack"] else {}
    check(f"torch_python: 4 x 64 MiB segments pinned to torch_python_site.py:{py_line}",
          top.get("python") is True and top.get("file", "").endswith("torch_python_site.py")
          and top.get("line") == py_line, json.dumps([l["stack"][:3] for l in rep["leaks"]])[:1500])

# 6: every byte accounted. While the process holds still, nvidia-smi lists its memory; the report's
# NVML view of it at the end must be that figure (MiB, within a few), and the rest, beyond what the
# trace explains, must be named, the CUDA context first. In a container NVML may list the process
# under a pid of another namespace: the report then has the whole device's view, compared with
# nvidia-smi's memory.used of the same GPU.
def smi(query, key):
    r = subprocess.run(["nvidia-smi", f"--query-{query}", "--format=csv,noheader,nounits"],
                       capture_output=True, text=True)
    rows = [[c.strip() for c in line.split(",")] for line in r.stdout.splitlines() if line.strip()]
    return {key(row[0]): int(row[1]) for row in rows if len(row) == 2 and row[1].isdigit()}


hold_dir = work / "traces" / "nvml_accounting"
hold_dir.mkdir(parents=True, exist_ok=True)
env = dict(os.environ, LD_PRELOAD=str(shim), GPUMEMSHIM_OUTPUT=str(hold_dir / "t.%p.trace"))
proc = subprocess.Popen([sys.executable, here / "nvml_hold.py"], env=env, stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, text=True)
ready = proc.stdout.readline().split()
time.sleep(2)  # idle: the shim samples about once a second
apps = smi("compute-apps=pid,used_memory", int)
gpus = smi("gpu=pci.bus_id,memory.used", str.upper)
out, _ = proc.communicate("", timeout=300)
print(f"   nvidia-smi: compute apps (pid: MiB) {apps}, GPUs (bus id: MiB used) {gpus}")
check("nvml_accounting: ran", proc.returncode == 0 and ready[:1] == ["ready"], repr((ready, out)))
rep = report("nvml_accounting", sorted(hold_dir.glob("*.trace*")))
points = rep["processes"][0]["accounting"] if rep else []
end = next((a for a in points if a["at"] == "end" and a["device"] == 0), None)
check("nvml_accounting: an NVML view at the end", end is not None and end["source"].startswith("nvml"),
      json.dumps(points)[:800])
if end:
    view_mib = end["device_view_bytes"] / MIB
    print(f"   end: {json.dumps(end)}")
    if proc.pid in apps:
        check("nvml_accounting: the view of the process is nvidia-smi's",
              end["source"] == "nvml" and abs(view_mib - apps[proc.pid]) <= 4,
              f"{view_mib:.1f} MiB vs {apps[proc.pid]} MiB")
    else:
        bus = ready[1].upper() if len(ready) > 1 else "?"
        print(f"   pid {proc.pid} not among nvidia-smi's compute apps: comparing GPU {bus}")
        check("nvml_accounting: the whole device's view is nvidia-smi's",
              end["source"] == "nvml_device" and bus in gpus and abs(view_mib - gpus[bus]) <= 64,
              f"{view_mib:.1f} MiB vs {gpus.get(bus)} MiB")
    check("nvml_accounting: the rest is not explained, the context named first",
          end["not_explained_bytes"] > 0 and end["likely_owners"][:1] == ["CUDA context"],
          json.dumps(end))
    check("nvml_accounting: cuBLAS named among the owners",
          any(o in end["likely_owners"] for o in ("cuBLAS", "cuBLASLt")), json.dumps(end["likely_owners"]))
    check("nvml_accounting: view = traced + not explained",
          end["device_view_bytes"] == end["traced_bytes"] + end["not_explained_bytes"], json.dumps(end))

# 4: hook overhead on the real runtime: ns per cudaMalloc+cudaFree pair (1 MiB), interleaved runs.
print("== overhead: ns per cudaMalloc+cudaFree pair of 1 MiB, median of 5 interleaved runs")
bench_src = here / "alloc_pairs.cu"
rows = []
for cudart in ("shared", "static"):
    exe = work / f"pairs_{cudart}"
    subprocess.run(["nvcc", "-O2", f"--cudart={cudart}", "-o", exe, bench_src], check=True)
    for depth in (1, 30):
        samples = {"bare": [], "shim, no stacks": [], "shim, native stacks": []}
        for _ in range(5):
            for label, extra in (("bare", None), ("shim, no stacks", {"GPUMEMSHIM_STACKS": "none"}),
                                 ("shim, native stacks", {"GPUMEMSHIM_STACKS": "native"})):
                r, _ = run(f"bench_{cudart}_{depth}", [exe, "3000", str(MIB), str(depth)], extra,
                           shim_on=extra is not None)
                samples[label].append(float(r.stdout.strip() or "nan"))
        med = {k: sorted(v)[len(v) // 2] for k, v in samples.items()}
        rows.append((cudart, depth, med))
print(f"{'cudart':>7} {'depth':>5} {'bare ns':>9} {'no stacks':>10} {'native':>9} {'+no stacks':>11} {'+native':>9}")
for cudart, depth, m in rows:
    b, n0, s = m["bare"], m["shim, no stacks"], m["shim, native stacks"]
    print(f"{cudart:>7} {depth:>5} {b:>9.0f} {n0:>10.0f} {s:>9.0f} {100 * (n0 - b) / b:>10.1f}% {100 * (s - b) / b:>8.1f}%")
finish()

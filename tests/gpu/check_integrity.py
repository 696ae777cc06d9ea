"""H200 checks of honest verdicts: VMM map-then-release, processes that end without exit() or are
killed, and every trace checked complete. Called by run_all.sh (GMS_GPU_CHECKS=integrity)."""
import json
import signal
import subprocess
import sys
import time

from gpu_checks import MIB, check, cli, finish, here, report, run, shim, site_line, work


def integrity(rep):
    return rep.get("integrity", {}).get("status")


def gate(traces, *extra):
    return subprocess.run([cli, "check", "--max-leak-bytes", "0", *extra, *traces],
                          capture_output=True, text=True)


# 1: map-then-release keeps the memory until the unmap; a mapping left at exit is a leak.
src = here / "vmm_map_release.cu"
exe = work / "vmm_map_release"
subprocess.run(["nvcc", "-g", "-O1", "-o", exe, src, "-lcuda"], check=True)
map_line = site_line(src, "map")
for mode in ("clean", "keep"):
    name = f"vmm_{mode}"
    r, traces = run(name, [exe, mode])
    gran = int(r.stdout.split("=")[1]) if r.stdout.startswith("granularity=") else 0
    check(f"{name}: ran", r.returncode == 0 and gran > 0, r.stdout + r.stderr[-400:])
    rep = report(name, traces) if traces else None
    if not rep:
        check(f"{name}: report", False, str(traces))
        continue
    check(f"{name}: trace complete", integrity(rep) == "complete", json.dumps(rep.get("integrity")))
    peak = rep["summary"].get("peak_bytes")
    check(f"{name}: peak = 3 mapped handles ({3 * gran} bytes)", peak == 3 * gran, f"peak {peak}")
    g = gate(traces)
    vmm_leaks = [l for l in rep["leaks"] if l["bytes"] == gran]
    if mode == "clean":
        check(f"{name}: nothing leaked, check passes", not vmm_leaks and g.returncode == 0,
              json.dumps(rep["leaks"])[:600] + g.stdout[-300:])
    else:
        top = vmm_leaks[0]["stack"][0] if vmm_leaks and vmm_leaks[0]["stack"] else {}
        check(f"{name}: the mapping left is a leak at vmm_map_release.cu:{map_line}",
              top.get("line") == map_line and top.get("file", "").endswith("vmm_map_release.cu"),
              json.dumps(rep["leaks"])[:800])
        check(f"{name}: check fails on it (exit 1)", g.returncode == 1, g.stdout[-300:] + g.stderr[-300:])

# 2: a forked child that ends through _exit, _Exit or quick_exit leaves its events.
src = here / "fork_exit.cu"
exe = work / "fork_exit"
subprocess.run(["nvcc", "-g", "-O1", "-o", exe, src], check=True)
child_line = site_line(src, "child")
for how in ("_exit", "_Exit", "quick_exit"):
    name = f"fork_{how}"
    r, traces = run(name, [exe, how])
    check(f"{name}: ran", r.returncode == 0 and "child=3" in r.stdout, r.stdout + r.stderr[-400:])
    child = [t for t in traces if report(f"{name}_{t.name}", [t]) and
             any(l["bytes"] == 8 * MIB for l in report(f"{name}_{t.name}", [t])["leaks"])]
    check(f"{name}: the child's trace has its 8 MiB leak", len(traces) == 2 and len(child) == 1,
          str(traces))
    if child:
        rep = report(f"{name}_child", child)
        top = next(l for l in rep["leaks"] if l["bytes"] == 8 * MIB)["stack"][0]
        check(f"{name}: at fork_exit.cu:{child_line}, trace complete",
              top.get("line") == child_line and integrity(rep) == "complete",
              json.dumps(top) + json.dumps(rep.get("integrity")))

# 3: a killed process: its trace is incomplete, check says so (exit 2), and its live buffers are
# alive when the trace ended, not leaks at exit.
tdir = work / "traces" / "killed"
tdir.mkdir(parents=True, exist_ok=True)
env = dict(__import__("os").environ, LD_PRELOAD=str(shim), GPUMEMSHIM_OUTPUT=str(tdir / "t.%p.trace"))
p = subprocess.Popen([str(exe), "sleep"], env=env, stdout=subprocess.PIPE, text=True)
line = p.stdout.readline()
time.sleep(0.5)  # a few flush intervals
child_pids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
for pid in child_pids:
    subprocess.run(["kill", "-KILL", pid])
p.wait(timeout=60)
traces = sorted(tdir.glob("*.trace*"))
killed = [t for t in traces if f".{child_pids[0]}." in t.name] if child_pids else []
check("killed: child ready and killed", line.strip() == "ready" and len(killed) == 1, f"{line!r} {traces}")
if killed:
    g = gate(killed)
    check("killed: check exits 2 naming the incomplete trace", g.returncode == 2 and "incomplete" in g.stderr,
          g.stderr[-400:])
    rep = report("killed", killed)
    check("killed: report says incomplete", rep is not None and integrity(rep) == "incomplete",
          json.dumps(rep.get("integrity") if rep else None))
    g = gate(killed, "--allow-incomplete")
    check("killed: --allow-incomplete: the live 8 MiB is not a leak at exit", g.returncode == 0,
          g.stdout[-400:] + g.stderr[-400:])

# 4: a multiprocessing worker (fork) that allocates through PyTorch.
src = here / "mp_worker.py"
r, traces = run("mp_worker", [sys.executable, src])
check("mp_worker: ran", r.returncode == 0 and "worker exit 0" in r.stdout, r.stdout + r.stderr[-600:])
reps = [report(f"mp_worker_{t.name}", [t]) for t in traces]
with_events = [x for x in reps if x and x["summary"].get("allocations", 0) > 0]
check("mp_worker: the worker's trace has its allocations", len(with_events) >= 1,
      str([(t.name, x["summary"].get("allocations") if x else None) for t, x in zip(traces, reps)]))

# 5: every trace this run wrote reads as complete (format 3 checked); bytes per event.
all_traces = sorted(t for t in (work / "traces").rglob("*.trace*") if t.is_file() and "killed" not in str(t))
bad = []
events = size = 0
for t in all_traces:
    s = subprocess.run([cli, "report", "--format", "json", t], capture_output=True, text=True)
    try:
        rep = json.loads(s.stdout)
    except ValueError:
        bad.append((t.name, s.stderr[-200:]))
        continue
    if integrity(rep) != "complete":
        bad.append((str(t.relative_to(work)), rep.get("integrity")))
    events += sum(p.get("events", 0) for p in rep.get("processes", []))
    size += t.stat().st_size
check("every trace: complete", all_traces and not bad, f"{len(all_traces)} traces; not complete: {bad[:5]}")
if events:
    print(f"   {len(all_traces)} traces: {size} bytes, {events} events, "
          f"{size / events:.2f} bytes per event (stacks and metadata included)")
finish()

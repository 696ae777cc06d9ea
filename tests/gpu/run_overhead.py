"""Drives overhead.py the way users pay the shim: every configuration in a fresh process, each round
running all of them in an order rotated by one from the round before (so no configuration always
runs first, after a cold GPU, or last); prints, per step kind and configuration, the median of the
per-process step medians, their spread (min-max and the interquartile range) and the overhead of
the median against base.

Configurations (GMS_OVERHEAD_CONFIGS, space-separated; base always runs):
  base          python3 overhead.py, nothing loaded
  record        gpumemshim record -- python3 overhead.py   (the user's way: shim, bridge, stacks)
  shim          LD_PRELOAD=libgpumemshim.so python3 overhead.py
  shim-python   the shim with GPUMEMSHIM_STACKS=python (no native walk on autograd threads)
  shim-nostack  the shim with GPUMEMSHIM_STACKS=none (events without any stack)
  shim-nocat    the shim with GPUMEMSHIM_CATEGORIES=0 (the memory categories' tags off)
  shim-nobridge the shim with GPUMEMSHIM_TORCH=0 (loaded, runtime hooks only, no tensor events)
  torch         torch.cuda.memory._record_memory_history(stacks="python")
  profiler      torch.profiler with its memory timeline's options
  interleaved   base, shim, shim-nocat and torch alternating step by step in one process under the shim
The shim-* rows split the record row's cost: being loaded (nobridge), the tensor events
(nostack), their stacks (record - nostack), the categories (record - nocat).
GMS_OVERHEAD_KINDS: step kinds (default "alloc compute optim", see overhead.py).
GMS_INTERLEAVED_RUNS: how many interleaved processes (default 1), each 2 x STEPS steps a variant.
Usage: run_overhead.py SHIM OUT.json [ROUNDS STEPS]   (the CLI is SHIM's ../bin/gpumemshim)"""
import json
import os
import pathlib
import statistics
import subprocess
import sys

shim, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 60
cli = shim.parent.parent / "bin" / "gpumemshim"
script = pathlib.Path(__file__).parent / "overhead.py"
tdir = out.parent / "overhead-traces"
tdir.mkdir(parents=True, exist_ok=True)
SHIM_ENV = {"shim": {}, "shim-python": {"GPUMEMSHIM_STACKS": "python"},
            "shim-nostack": {"GPUMEMSHIM_STACKS": "none"}, "shim-nocat": {"GPUMEMSHIM_CATEGORIES": "0"},
            "shim-nobridge": {"GPUMEMSHIM_TORCH": "0"}}
KINDS = tuple(os.environ.get("GMS_OVERHEAD_KINDS", "alloc compute optim").split())
CONFIGS = ("base", *[c for c in os.environ.get(
    "GMS_OVERHEAD_CONFIGS", "record shim torch shim-python shim-nocat profiler").split()
    if c not in ("base", "interleaved")])
results = []


def run_one(kind, config, r, n_steps):
    env = dict(os.environ)
    trace = str(tdir / f"{kind}.{config}.{r}.%p.trace")
    argv = [sys.executable, str(script), kind, "shim" if config == "record" else config.split("-")[0],
            str(n_steps)]
    if config == "record":
        argv = [str(cli), "record", "-o", trace, "--"] + argv
    elif config in SHIM_ENV or config == "interleaved":
        env.update(SHIM_ENV.get(config, {}), LD_PRELOAD=str(shim), GPUMEMSHIM_OUTPUT=trace)
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        print(f"{kind} {config} round {r}: exit {p.returncode}\n{p.stderr[-2000:]}", flush=True)
        return []
    rows = [json.loads(l) for l in p.stdout.strip().splitlines() if l.startswith("{")]
    for row in rows:
        if config != "interleaved":
            row["config"] = config
        row["round"] = r
    return rows


for kind in KINDS:
    for r in range(rounds):
        order = CONFIGS[r % len(CONFIGS):] + CONFIGS[:r % len(CONFIGS)]
        for config in order:
            results += run_one(kind, config, r, steps)
    if "interleaved" in os.environ.get("GMS_OVERHEAD_CONFIGS", "interleaved"):
        for r in range(int(os.environ.get("GMS_INTERLEAVED_RUNS", "1"))):
            results += run_one(kind, "interleaved", r, 2 * steps)


def quartiles(v):
    if len(v) < 4:
        return min(v), max(v)
    q = statistics.quantiles(v, n=4)
    return q[0], q[2]


table = {}
for kind in KINDS:
    base_ms = [x["median_ms"] for x in results if x["kind"] == kind and x["config"] == "base"]
    if not base_ms:
        continue
    base = statistics.median(base_ms)
    names = list(CONFIGS) + ["in-process " + v for v in ("base", "shim", "shim-nocat", "torch")]
    for config in names:
        ref = base
        if config.startswith("in-process"):
            inp = [x["median_ms"] for x in results if x["kind"] == kind and x["config"] == "in-process base"]
            ref = inp[0] if inp else base
        rows = [x for x in results if x["kind"] == kind and x["config"] == config]
        if not rows:
            continue
        ms = [x["median_ms"] for x in rows]
        m = statistics.median(ms)
        q1, q3 = quartiles(ms)
        table[f"{kind}/{config}"] = {
            "median_ms": m, "overhead_pct": 100 * (m / ref - 1), "min_ms": min(ms), "max_ms": max(ms),
            "q1_ms": q1, "q3_ms": q3, "processes": len(ms), "process_medians": ms,
            "allocs_per_step": rows[0]["allocs_per_step"]}
        print(f"{kind:8s} {config:17s} median {m:8.3f} ms  overhead {100 * (m / ref - 1):+6.2f}%  "
              f"IQR {q1:.3f}-{q3:.3f}  range {min(ms):.3f}-{max(ms):.3f}  n={len(ms)}  "
              f"allocs/step {rows[0]['allocs_per_step']}", flush=True)
out.write_text(json.dumps({"rounds": rounds, "steps": steps, "configs": list(CONFIGS),
                           "results": results, "table": table}, indent=1))

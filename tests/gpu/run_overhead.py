"""Drives overhead.py: configurations interleaved round by round in one run (base, shim, torch,
base, shim, torch, ...), each a fresh process; prints a table of the median of the per-process
step medians and the overhead against base. shim-nocat is the shim with GPUMEMSHIM_CATEGORIES=0: the
memory categories' tags cost shim minus shim-nocat (kind optim has an optimizer to tag); profiler
is torch.profiler with its memory timeline's options. GMS_OVERHEAD_KINDS and GMS_OVERHEAD_CONFIGS
(space-separated) choose a subset; base always runs.
Usage: run_overhead.py SHIM OUT.json [ROUNDS STEPS]"""
import json
import os
import pathlib
import statistics
import subprocess
import sys

shim, out = sys.argv[1], pathlib.Path(sys.argv[2])
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 60
script = pathlib.Path(__file__).parent / "overhead.py"
tdir = out.parent / "overhead-traces"
tdir.mkdir(parents=True, exist_ok=True)
results = []
KINDS = tuple(os.environ.get("GMS_OVERHEAD_KINDS", "alloc compute optim").split())
CONFIGS = ("base", *[c for c in os.environ.get(
    "GMS_OVERHEAD_CONFIGS", "shim torch shim-python shim-nocat profiler").split() if c != "base"])
for kind in KINDS:
    for r in range(rounds):
        for config in CONFIGS:
            env = dict(os.environ)
            if config.startswith("shim"):
                env["LD_PRELOAD"] = shim
                env["GPUMEMSHIM_OUTPUT"] = str(tdir / f"{kind}.{r}.%p.trace")
            if config == "shim-python":  # Python stacks only: no native walk on autograd threads
                env["GPUMEMSHIM_STACKS"] = "python"
            if config == "shim-nocat":  # the memory categories' tags off (their cost: shim - this)
                env["GPUMEMSHIM_CATEGORIES"] = "0"
            p = subprocess.run([sys.executable, str(script), kind, config.split("-")[0], str(steps)], env=env,
                               capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                print(p.stderr[-2000:])
                continue
            row = json.loads(p.stdout.strip().splitlines()[-1])
            row["config"] = config
            results.append(row)
    # The same three, alternating step by step inside one process under the shim.
    if "interleaved" not in os.environ.get("GMS_OVERHEAD_CONFIGS", "interleaved"):
        continue
    env = dict(os.environ, LD_PRELOAD=shim, GPUMEMSHIM_OUTPUT=str(tdir / f"{kind}.interleaved.%p.trace"))
    p = subprocess.run([sys.executable, str(script), kind, "interleaved", str(2 * steps)], env=env,
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        print(p.stderr[-2000:])
    else:
        results += [json.loads(l) for l in p.stdout.strip().splitlines() if l.startswith("{")]
table = {}
for kind in KINDS:
    base = statistics.median(x["median_ms"] for x in results if x["kind"] == kind and x["config"] == "base")
    for config in ("base", "shim", "shim-nocat", "shim-python", "torch", "profiler", "in-process base",
                   "in-process shim", "in-process torch"):
        if config.startswith("in-process"):
            ref = [x["median_ms"] for x in results if x["kind"] == kind and x["config"] == "in-process base"]
            base = ref[0] if ref else base
        ms = [x["median_ms"] for x in results if x["kind"] == kind and x["config"] == config]
        allocs = [x["allocs_per_step"] for x in results if x["kind"] == kind and x["config"] == config]
        if not ms:
            continue
        m = statistics.median(ms)
        table[f"{kind}/{config}"] = {"median_ms": m, "overhead_pct": 100 * (m / base - 1),
                                     "process_medians": ms, "allocs_per_step": allocs[0]}
        print(f"{kind:8s} {config:17s} median {m:8.3f} ms  overhead {100 * (m / base - 1):+6.2f}%  "
              f"allocs/step {allocs[0]}  per-process {['%.3f' % v for v in ms]}")
out.write_text(json.dumps({"rounds": rounds, "steps": steps, "results": results, "table": table}, indent=1))

"""Traces of several processes (ranks, fork children) reported together — per-rank
summary, the imbalance between ranks with the call sites that explain it, findings per rank — and
many traces analysed on all cores with the same result as one at a time."""
import json
import os
import pathlib
import pty
import select
import subprocess

from conftest import BUILD, CLI, SCENARIOS, cli_env, site_line

MIB = 1 << 20
RANKS_APP = BUILD / "tests" / "integration" / "ranks_app"


def run_ranks(run, ranks, **env):
    """Runs ranks_app once per rank with RANK set, traces named by rank (%r)."""
    for rank in ranks:
        r = run.program([RANKS_APP], RANK=rank, GPUMEMSHIM_OUTPUT=run.dir / "trace.%r", **env)
        assert r.returncode == 0 and r.stdout == f"rank {rank} done\n", r.stderr
    traces = [run.dir / f"trace.{rank}" for rank in ranks]
    assert all(t.exists() for t in traces), sorted(run.dir.iterdir())
    return traces


def test_imbalance_names_the_heavier_rank_and_the_line_that_makes_it(run):
    traces = run_ranks(run, [0, 1, 2])
    # Given out of order: the report orders ranks itself.
    report = run.report(traces[2], traces[0], traces[1])
    ranks = report["ranks"]
    assert [e["rank"] for e in ranks["per_rank"]] == [0, 1, 2]
    pids = {p["rank"]: p["pid"] for p in report["processes"]}
    assert [e["pid"] for e in ranks["per_rank"]] == [pids[0], pids[1], pids[2]]
    # Every rank: 4 MiB of weights + 4 x 512 KiB of activations; rank 1 also a 3 MiB shard.
    assert [e["peak_bytes"] for e in ranks["per_rank"]] == [6 * MIB, 9 * MIB, 6 * MIB]
    imbalance = ranks["imbalance"]
    assert imbalance["heaviest_rank"] == 1
    assert imbalance["lightest_rank"] in (0, 2)
    assert imbalance["peak_bytes_diff"] == 3 * MIB
    assert imbalance["peak_ratio"] == 1.5
    # Weights and activations are the same on every rank: only the shard explains the difference.
    [site] = imbalance["sites"]
    assert site["bytes_diff"] == 3 * MIB
    top = site["stack"][0]
    assert top["file"].endswith("ranks_app.cpp") and top["line"] == site_line("uneven shard", "ranks_app.cpp")

    text = run.cli("report", *traces)
    assert text.returncode == 0, text.stderr
    assert f"imbalance: rank 1 (pid {pids[1]})" in text.stdout
    assert f"ranks_app.cpp:{site_line('uneven shard', 'ranks_app.cpp')}" in text.stdout


def test_findings_carry_their_rank(run):
    traces = run_ranks(run, [0, 1, 2], LEAK_RANK=2)
    report = run.report(*traces)
    [leak] = report["leaks"]
    assert leak["rank"] == 2 and leak["bytes"] == MIB
    assert leak["pid"] == next(p["pid"] for p in report["processes"] if p["rank"] == 2)
    assert leak["stack"][0]["line"] == site_line("rank leak", "ranks_app.cpp")
    per_rank = {e["rank"]: e for e in report["ranks"]["per_rank"]}
    assert per_rank[2]["findings"] == [{"kind": "leak", "id": leak["id"], "bytes": MIB}]
    assert per_rank[2]["leaked_bytes"] == MIB
    assert per_rank[0]["findings"] == [] and per_rank[1]["findings"] == []
    assert per_rank[0]["leaked_bytes"] == per_rank[1]["leaked_bytes"] == 0


def test_one_process_has_no_ranks_block(run):
    [trace] = run_ranks(run, [0])
    assert "ranks" not in run.report(trace)


def test_fork_children_are_reported_next_to_their_parent(run):
    r = run.program([SCENARIOS, "fork"], RANK=0)
    assert r.returncode == 0, r.stderr
    traces = run.traces()
    assert len(traces) == 2
    report = run.report(*traces)
    pids = {p["pid"] for p in report["processes"]}
    [parent] = [p for p in report["processes"] if p["ppid"] not in pids]
    per_rank = report["ranks"]["per_rank"]
    assert [e["rank"] for e in per_rank] == [0, 0]  # the child inherits RANK
    imbalance = report["ranks"]["imbalance"]
    # The parent leaks 3 x 1 MiB before forking; the child's own trace holds only its 2 MiB.
    assert imbalance["heaviest_pid"] == parent["pid"]
    assert imbalance["peak_bytes_diff"] == MIB
    assert imbalance["sites"][0]["stack"][0]["line"] == site_line("planted leak")
    assert imbalance["sites"][0]["bytes_diff"] == 3 * MIB


def many_traces(run):
    traces = run_ranks(run, range(6), LEAK_RANK=4, STEPS=5)
    return traces + traces[:2]  # the same file twice: analysed once, the repeats noted


def test_parallel_analysis_equals_sequential(run):
    traces = many_traces(run)
    outputs = {}
    for jobs in ("1", "3", "8"):
        for fmt in ("json", "text"):
            r = run.cli("report", "--format", fmt, "--jobs", jobs, *traces)
            assert r.returncode == 0 and r.stderr == "", r.stderr
            outputs[(jobs, fmt)] = r.stdout
    default = run.cli("report", "--format", "json", *traces)
    assert default.returncode == 0
    assert outputs[("1", "json")] == outputs[("3", "json")] == outputs[("8", "json")] == default.stdout
    assert outputs[("1", "text")] == outputs[("3", "text")] == outputs[("8", "text")]
    report = json.loads(outputs[("3", "json")])
    assert [p["trace"] for p in report["processes"]] == [str(t) for t in traces[:6]]  # input order
    assert [(d["trace"], d["same_as"]) for d in report["integrity"]["duplicates"]] == [
        (str(traces[6]), str(traces[0])), (str(traces[7]), str(traces[1]))]
    assert len(report["notes"]) == 2 and "counted once" in report["notes"][0]
    assert report["summary"]["leaked_bytes"] == MIB


def test_one_trace_reads_alike_on_any_number_of_cores(run):
    """One trace, its load spread over the cores it is given (read, replay and the symbols' warm-up
    threads): the same report, to the byte, as on one core."""
    [trace] = run_ranks(run, [2], LEAK_RANK=2, STEPS=5)
    outputs = {}
    for jobs in ("1", "2", "4"):
        for fmt in ("json", "text"):
            r = run.cli("report", "--format", fmt, "--jobs", jobs, trace)
            assert r.returncode == 0 and r.stderr == "", r.stderr
            outputs[(jobs, fmt)] = r.stdout
    assert outputs[("1", "json")] == outputs[("2", "json")] == outputs[("4", "json")]
    assert outputs[("1", "text")] == outputs[("2", "text")] == outputs[("4", "text")]
    [leak] = json.loads(outputs[("2", "json")])["leaks"]
    assert leak["stack"][0]["file"].endswith("ranks_app.cpp")
    assert leak["stack"][0]["line"] == site_line("rank leak", "ranks_app.cpp")


def test_parallel_error_names_the_first_bad_trace(run):
    good = run_ranks(run, [0, 1])
    garbage = run.dir / "garbage.trace"
    garbage.write_bytes(b"this is not a trace at all\n" * 10)
    empty = run.dir / "empty.trace"
    empty.write_bytes(b"")
    for jobs in ("1", "4"):
        r = run.cli("report", "--jobs", jobs, good[0], garbage, good[1], empty)
        assert r.returncode == 2
        assert r.stdout == ""
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "garbage.trace" in lines[0] and "bad magic" in lines[0], r.stderr


def report_with_stderr_on_a_terminal(run, *args, **env):
    """Runs `report` with stderr on a pseudo-terminal, stdout on a pipe; returns (stdout, stderr)."""
    master, slave = pty.openpty()
    e = cli_env()
    e.update(env)
    p = subprocess.Popen([str(CLI), "report", *map(str, args)], stdout=subprocess.PIPE, stderr=slave,
                         env=e, cwd=run.dir)
    os.close(slave)
    stdout = p.stdout.read()
    assert p.wait(timeout=120) == 0
    err = b""
    while select.select([master], [], [], 0.2)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    os.close(master)
    return stdout.decode(), err.decode(errors="replace")


def test_progress_only_on_a_terminal_and_never_in_the_json(run):
    traces = many_traces(run)
    out, err = report_with_stderr_on_a_terminal(run, "--format", "json", *traces,
                                                GPUMEMSHIM_PROGRESS_DELAY_MS="0")
    assert "analysing" in err and f"/{len(set(traces))} traces" in err  # each file once
    json.loads(out)  # stdout stays pure JSON
    out_quiet, err_quiet = report_with_stderr_on_a_terminal(run, "--format", "json", "--quiet", *traces,
                                                            GPUMEMSHIM_PROGRESS_DELAY_MS="0")
    assert err_quiet == "" and out_quiet == out
    # Not a terminal: silent even when the delay is over.
    e = cli_env()
    e["GPUMEMSHIM_PROGRESS_DELAY_MS"] = "0"
    piped = subprocess.run([str(CLI), "report", "--format", "json", *map(str, traces)], env=e,
                           capture_output=True, text=True, cwd=run.dir, timeout=120)
    assert piped.returncode == 0 and piped.stderr == "" and piped.stdout == out
    # The default delay (~2 s) keeps a short analysis silent on a terminal too.
    _, err_default = report_with_stderr_on_a_terminal(run, "--format", "json", *traces)
    assert err_default == ""

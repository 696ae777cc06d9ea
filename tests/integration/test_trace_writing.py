"""How the shim writes its trace (format 3): blocks in sequence with checksums and LZ4, an End
whose counts match, the first failed write reported once and marked in the header while the
program runs on untouched, output names that are not new regular files refused, and the last
events and End written by processes that end through _exit, _Exit, quick_exit or os._exit."""
import errno
import os
import resource
import subprocess
import sys

import pytest

from conftest import BUILD, CLI, FAKECUDA, SCENARIOS, SOURCES, base_env, shim_preload
from trace_records import (END, LZ4, WRITE_FAILED, alloc_sizes, blocks, end_record, frames,
                           header, records)

CHECK_BLOCKS = BUILD / "tests" / "integration" / "check_blocks"
MIB = 1 << 20
WARNING = "cannot write trace"


def checked(trace):
    """check_blocks' summary of a trace (every block's checksums, decompression and record count
    verified)."""
    r = subprocess.run([str(CHECK_BLOCKS), str(trace)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    words = r.stdout.split()
    return dict(zip(words[::2], map(int, words[1::2])))


def test_blocks_are_in_sequence_checked_compressed_and_ended(run):
    r = run.program([SCENARIOS, "threads", 16, 4000])
    assert r.returncode == 0 and r.stderr == ""
    [trace] = run.traces()
    assert header(trace) == ((3, 3), 0, 0)
    summary = checked(trace)
    assert summary["seq_contiguous"] == 1 and summary["tail"] == 0
    assert summary["lz4"] >= 1, "the flusher's blocks are compressed"
    assert summary["zstd"] == 0, "zstd is the codec of writers before 3.3"
    found = blocks(trace)
    assert [b["seq"] for b in found] == list(range(len(found)))
    first = [kind for kind, _, _ in frames(found[0]["payload"])]
    assert first[:2] == [1, 10] and 2 in first, first  # Process, Attribute, the module scan
    last = [kind for kind, _, _ in frames(found[-1]["payload"])]
    assert last == [END]
    _, end_blocks, end_records, write_error = end_record(trace)
    assert end_blocks == len(found) - 1
    assert end_records == sum(b["record_count"] for b in found[:-1])
    assert write_error == 0
    kinds = [kind for kind, _ in records(trace)]
    assert kinds.count(4) == kinds.count(5) == 16 * 4000
    # How small a block gets depends on how many records a flush finds, which a slow machine or a
    # sanitizer build changes; the bytes per event target is measured in bench/ (docs/benchmarks.md
    # "Trace size and decoding"). What holds on any machine: the records are in LZ4 blocks, and
    # those blocks are several times smaller than their records.
    packed = [b for b in found if b["codec"] == LZ4]
    assert sum(b["record_count"] for b in packed) >= 0.99 * len(kinds)
    ratio = sum(b["stored_size"] for b in packed) / sum(b["raw_size"] for b in packed)
    assert ratio <= 0.3, f"LZ4 blocks stored at {ratio:.2f} of their records' size"


def _limited(limit):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def _run_limited(run, args, limit, **env):
    e = base_env(LD_PRELOAD=shim_preload(), GPUMEMSHIM_OUTPUT=run.dir / "app.%p.trace", **env)
    return subprocess.run([str(a) for a in args], env=e, capture_output=True, text=True,
                          timeout=120, cwd=run.dir, preexec_fn=_limited(limit))


def _assert_write_failed(run, result, bare, err):
    assert result.returncode == bare.returncode == 0
    assert result.stdout == bare.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpumemshim: ") and WARNING in lines[0], lines
    assert os.strerror(err) in lines[0], lines
    [trace] = run.traces()
    (version, flags, write_error) = header(trace)
    assert version == (3, 3) and flags & WRITE_FAILED and write_error == err
    return trace


def test_file_size_limit_is_a_write_failure_not_a_signal(run):
    args = [SCENARIOS, "threads", 4, 20000]
    bare = run.program(args, shim=False)
    r = _run_limited(run, args, 64 * 1024)
    trace = _assert_write_failed(run, r, bare, errno.EFBIG)
    assert trace.stat().st_size <= 64 * 1024
    checked(trace)  # what was written before the failure is whole and checked
    # Dropped blocks use up their sequence numbers and count in End: a reader sees the gap.
    found = blocks(trace)
    seqs = [b["seq"] for b in found]
    assert seqs == sorted(set(seqs)) and seqs[0] == 0 and seqs[-1] > len(found) - 1, seqs
    # The End block is small enough to fit under the limit: tried, written, saying what happened.
    assert [k for k, _, _ in frames(found[-1]["payload"])] == [END]
    _, end_blocks, end_records, write_error = end_record(trace)
    assert end_blocks == seqs[-1] and write_error == errno.EFBIG
    assert end_records > sum(b["record_count"] for b in found[:-1])


def test_check_names_the_write_failure(run):
    r = _run_limited(run, [SCENARIOS, "threads", 4, 20000], 64 * 1024)
    assert r.returncode == 0
    [trace] = run.traces()
    c = run.cli("check", trace)
    assert c.returncode == 2, (c.returncode, c.stdout, c.stderr)
    assert "write-failed" in c.stdout + c.stderr or "File too large" in c.stdout + c.stderr


@pytest.fixture
def full_tmpfs(tmp_path):
    """A 256 KiB tmpfs (root and CAP_SYS_ADMIN only)."""
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                       capture_output=True, text=True)
    if m.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {m.stderr.strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_full_disk_is_reported_once_and_marked(run, full_tmpfs):
    args = [SCENARIOS, "threads", 8, 40000]
    bare = run.program(args, shim=False)
    r = run.program(args, GPUMEMSHIM_OUTPUT=full_tmpfs / "app.%p.trace")
    run.dir = full_tmpfs
    trace = _assert_write_failed(run, r, bare, errno.ENOSPC)
    assert checked(trace)["blocks"] >= 1


def _assert_refused(run, target, created_before):
    bare = run.program([SCENARIOS, "leak"], shim=False)
    r = run.program([SCENARIOS, "leak"], GPUMEMSHIM_OUTPUT=target)
    assert r.returncode == bare.returncode == 0 and r.stdout == bare.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and WARNING in lines[0] and str(target) in lines[0], lines
    assert "not a regular file" in lines[0]
    assert set(run.dir.iterdir()) == created_before, "no trace, no .N sidecar"


def test_dev_full_is_refused_without_sidecars(run):
    bare = run.program([SCENARIOS, "leak"], shim=False)
    r = run.program([SCENARIOS, "leak"], GPUMEMSHIM_OUTPUT="/dev/full")
    assert r.returncode == bare.returncode == 0 and r.stdout == bare.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and WARNING in lines[0] and "/dev/full" in lines[0], lines
    assert not any(name.startswith("full.") for name in os.listdir("/dev"))


@pytest.mark.parametrize("kind", ["directory", "symlink", "fifo"])
def test_names_that_are_not_regular_files_are_refused(run, kind):
    target = run.dir / "out.trace"
    if kind == "directory":
        target.mkdir()
    elif kind == "symlink":
        (run.dir / "victim").write_text("keep me\n")
        target.symlink_to(run.dir / "victim")
    else:
        os.mkfifo(target)
    before = set(run.dir.iterdir())
    _assert_refused(run, target, before)
    if kind == "symlink":
        assert (run.dir / "victim").read_text() == "keep me\n"


def test_existing_regular_file_gets_a_suffix(run):
    target = run.dir / "out.trace"
    target.write_text("someone else's\n")
    r = run.program([SCENARIOS, "leak"], GPUMEMSHIM_OUTPUT=target)
    assert r.returncode == 0 and r.stderr == ""
    assert target.read_text() == "someone else's\n"
    assert header(run.dir / "out.trace.1")[0] == (3, 3)


def _by_pid(run):
    """{pid: trace} from app.PID.trace names."""
    return {int(t.name.split(".")[1]): t for t in run.traces()}


def _ended_last(trace):
    found = blocks(trace)
    assert [b["seq"] for b in found] == list(range(len(found)))
    assert [k for k, _, _ in frames(found[-1]["payload"])] == [END]
    assert sum(1 for k, _ in records(trace) if k == END) == 1
    _, end_blocks, end_records, write_error = end_record(trace)
    assert (end_blocks, write_error) == (len(found) - 1, 0)
    assert end_records == sum(b["record_count"] for b in found[:-1])


@pytest.mark.parametrize("how", ["_exit", "_Exit", "quick_exit"])
def test_fork_child_ending_without_exit_handlers_writes_its_end(run, how):
    r = run.program([SCENARIOS, "fork-exit", how])
    assert r.returncode == 0 and "child done" in r.stdout and "parent done" in r.stdout, r
    traces = list(_by_pid(run).values())
    assert len(traces) == 2
    child = [t for t in traces if alloc_sizes(t) == [2 * MIB]]
    parent = [t for t in traces if alloc_sizes(t) == [MIB] * 3]
    assert len(child) == len(parent) == 1, [alloc_sizes(t) for t in traces]
    _ended_last(child[0])
    _ended_last(parent[0])
    assert checked(child[0])["seq_contiguous"] == 1


def test_vfork_child_exit_leaves_the_parents_trace_alone(run):
    r = run.program([SCENARIOS, "vfork-exit"])
    assert r.returncode == 0 and r.stdout == "parent done 3\n", r
    [trace] = run.traces()
    assert alloc_sizes(trace) == [MIB] * 3 + [2 * MIB]
    _ended_last(trace)


def test_multiprocessing_fork_worker_traces_its_events(run):
    r = run.program([sys.executable, SOURCES / "mp_fork_alloc.py", FAKECUDA / "libcudart.so.13"])
    assert r.returncode == 0 and "worker done" in r.stdout and "done 0" in r.stdout, r
    traces = run.traces()
    worker = [t for t in traces if 3 * MIB in alloc_sizes(t)]
    assert len(worker) == 1, [alloc_sizes(t) for t in traces]
    assert MIB not in alloc_sizes(worker[0]), "the parent's allocation leaked into the child"
    _ended_last(worker[0])

"""Format 1.1: the shim's flusher ends each periodic flush with a Flush mark, which lets the analyzer
order a trace without holding a second of events (docs/trace-format.md "Ordering")."""
from conftest import SCENARIOS, SLOW_WRITES
from trace_records import FLUSH, LZ4, blocks, records


def _events_behind_a_mark(trace):
    """The marks' times (checked never to go back), the timed events, and how many of those come
    after a mark newer than themselves (stragglers)."""
    marks = []  # times of the marks read so far
    events = stragglers = 0
    for kind, time in records(trace):
        if kind == FLUSH:
            assert not marks or time >= marks[-1]
            marks.append(time)
        elif time is not None:
            events += 1
            stragglers += bool(marks) and time < marks[-1]
    return marks, events, stragglers


def test_every_record_after_a_mark_is_at_or_after_the_mark(run):
    """A mark's time is the earliest of the flusher's cut and the time of any record a thread is
    still making (shim/record/in_flight.h): a thread preempted between its clock read and its
    buffer, on a loaded machine, buffers its record after later flushes, which must not make the
    mark a lie. Eight threads on this machine's few cores are preempted there now and then. Only a
    thread that spends more than a flush interval making one record may land behind a mark (the
    marks do not wait longer for it): the analyzer replays such a straggler late and says so."""
    r = run.program([SCENARIOS, "threads", 8, 20000], timeout=300)
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    marks, events, stragglers = _events_behind_a_mark(trace)
    assert events == 2 * 8 * 20000
    assert stragglers <= events // 1000, f"{stragglers} of {events} events behind a mark"
    assert len(marks) >= 2, "the run spans several flush intervals"
    summary = run.report(trace)["summary"]
    assert summary["allocations"] == summary["frees"] == 8 * 20000
    assert "flush mark" in run.cli("stats", trace).stdout


def _events_behind_in_their_flush(trace, threads):
    """How many events come after a newer one of the same flush (between two marks), and how many
    timed events there are. Also checks that every thread's events keep their own order and that
    `threads` threads made them."""
    behind = events = 0
    newest = -1  # in the current flush
    last_by_thread = {}
    for kind, time, thread in records(trace, with_thread=True):
        if kind == FLUSH:
            newest = -1
            continue
        if time is None:
            continue
        events += 1
        if time < newest:
            behind += 1
        newest = max(newest, time)
        assert time >= last_by_thread.get(thread, 0), f"thread {thread} out of its own order"
        last_by_thread[thread] = time
    assert len(last_by_thread) == threads
    return behind, events


def test_each_flush_is_in_time_order_across_threads(run):
    """The flusher merges what it takes from every thread's buffer by time (shim/record/
    flush_order.h): between two marks the events are in time order but for a few stragglers (made
    just before a cut, buffered just after their thread's buffer was taken), and every thread's
    events keep their own order. Written thread after thread, most events of a flush would be
    behind one already written in it (about 80 % with 8 threads); a full buffer written by its own
    thread, as when the flusher is starved of a core, puts thousands behind (now the thread flushes
    every buffer in time order in the flusher's place)."""
    r = run.program([SCENARIOS, "threads", 8, 20000], timeout=300)
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    behind, events = _events_behind_in_their_flush(trace, 8)
    assert events == 2 * 8 * 20000
    assert behind <= events // 100, f"{behind} of {events} events behind an earlier one of the flush"


def test_a_slow_disk_keeps_each_flush_in_time_order(run):
    """Every write of the trace takes 30 ms (a slow or busy disk): the flusher spends each flush
    waiting for its write while eight threads fill their buffers. A thread whose buffer is full
    waits for that flush, which takes its records too, rather than writing its buffer on its own
    after a few ms of spinning: written on its own, its events come ahead of older ones of the
    other threads (a third of all events behind one already written, and thousands behind a mark),
    uncompressed (about 40 bytes an event instead of 7), and the analyzer must sort them back or
    call them late. Nor does a thread take over a flush that is only slow: the disk's wait would
    then be the program's."""
    r = run.program([SCENARIOS, "threads", 8, 20000], timeout=300, before_shim=[SLOW_WRITES],
                    SLOW_WRITES_MS=30)
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    behind, events = _events_behind_in_their_flush(trace, 8)
    assert events == 2 * 8 * 20000
    assert behind <= events // 100, f"{behind} of {events} events behind an earlier one of the flush"
    marks, _, stragglers = _events_behind_a_mark(trace)
    assert len(marks) >= 2, "the run spans several flushes"
    assert stragglers <= events // 1000, f"{stragglers} of {events} events behind a mark"
    in_lz4 = sum(b["record_count"] for b in blocks(trace) if b["codec"] == LZ4)
    assert in_lz4 >= 0.99 * events, f"{events - in_lz4} records outside the flushes' LZ4 blocks"
    report = run.report(trace)
    summary = report["summary"]
    assert summary["allocations"] == summary["frees"] == 8 * 20000
    assert report["integrity"].get("late_events", 0) <= events // 1000, report["integrity"]


def test_busy_threads_on_one_core_stream_with_a_window_of_a_few_flushes(run):
    """64 threads of alloc/free pairs, each keeping 4 KiB at the end, and three busy loops on one core (the flusher gets a
    sixty-seventh of it): recording threads flush in the flusher's place when it is late, and the
    marks wait at most a flush interval for a preempted thread, so the analyzer streams the trace
    in a window of a few flushes' events, never falling back to holding the whole trace, and its
    findings are those of the fully buffered read (GPUMEMSHIM_READ_BUFFERED=1)."""
    import json
    import shutil
    import subprocess

    from conftest import CLI, cli_env

    # Long enough that the window (a few flushes, stretched by how long a thread that flushes
    # waits for the one core: up to a few hundred ms among 67 runnable threads) is a small part.
    pairs = 20000
    taskset = shutil.which("taskset")
    pin = [taskset, "-c", "0"] if taskset else []
    busy = [subprocess.Popen([*pin, "sh", "-c", "while :; do :; done"]) for _ in range(3)]
    try:
        r = run.program([*pin, SCENARIOS, "threads", 64, pairs, 0, 4096], timeout=600)
    finally:
        for p in busy:
            p.kill()
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    stats = run.cli("stats", trace).stdout
    assert "read             streamed" in stats, stats
    window = int(stats.split("order window")[1].split()[0])
    events = 2 * 64 * pairs + 64
    # The window holds the latest flush and what its mark left: about one flush's events (a few
    # when the thread flushing is preempted, which on one shared core can take 300 ms), where
    # holding the trace would be all of them.
    assert window <= events // 4, (window, stats)

    def report(**env):
        p = subprocess.run([str(CLI), "report", "--format", "json", str(trace)], capture_output=True,
                           text=True, env=dict(cli_env(), **env), timeout=300)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    streamed, buffered = report(), report(GPUMEMSHIM_READ_BUFFERED="1")
    assert streamed["summary"]["allocations"] == 64 * pairs + 64
    assert streamed["summary"]["leaked_bytes"] == 64 * 4096
    for key in ("summary", "leaks", "growth", "peaks", "integrity", "recommendations"):
        assert streamed.get(key) == buffered.get(key), key
    buffered_stats = subprocess.run([str(CLI), "stats", str(trace)], capture_output=True, text=True,
                                    env=dict(cli_env(), GPUMEMSHIM_READ_BUFFERED="1")).stdout
    assert "fully buffered (GPUMEMSHIM_READ_BUFFERED=1)" in buffered_stats

"""Format 1.1: the shim's flusher ends each periodic flush with a Flush mark, which lets the analyzer
order a trace without holding a second of events (docs/trace-format.md "Ordering")."""
from conftest import SCENARIOS
from trace_records import FLUSH, records


def test_every_record_after_a_mark_is_at_or_after_the_mark(run):
    """A mark's time is the earliest of the flusher's cut and the time of any record a thread is
    still making (shim/record/in_flight.h): a thread preempted between its clock read and its
    buffer, on a loaded machine, buffers its record after later flushes, which must not make the
    mark a lie. (The analyzer trusts only the mark before the latest one: older shims' marks were
    the cut alone.) Eight threads on this machine's few cores are preempted there now and then."""
    r = run.program([SCENARIOS, "threads", 8, 20000], timeout=300)
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
    marks = []  # times of the marks read so far
    events = 0
    for kind, time in records(trace):
        if kind == FLUSH:
            assert not marks or time >= marks[-1]
            marks.append(time)
        elif time is not None:
            events += 1
            if marks:
                assert time >= marks[-1], (time, marks[-1])
    assert events == 2 * 8 * 20000
    assert len(marks) >= 2, "the run spans several flush intervals"
    summary = run.report(trace)["summary"]
    assert summary["allocations"] == summary["frees"] == 8 * 20000
    assert "flush mark" in run.cli("stats", trace).stdout


def test_each_flush_is_in_time_order_across_threads(run):
    """The flusher merges what it takes from every thread's buffer by time (shim/record/
    flush_order.h): between two marks the events are in time order but for a few stragglers (made
    just before a cut, buffered just after their thread's buffer was taken), and every thread's
    events keep their own order. Written thread after thread, most events of a flush would be
    behind one already written in it (about 80 % with 8 threads)."""
    r = run.program([SCENARIOS, "threads", 8, 20000], timeout=300)
    assert r.returncode == 0, r.stderr
    [trace] = run.traces()
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
    assert events == 2 * 8 * 20000
    assert len(last_by_thread) == 8
    # 0 on an idle machine; a flusher starved of CPU lets rings fill, and their owners drain them
    # unordered: a bound well above that and far below what thread-after-thread flushes give.
    assert behind <= events // 20, f"{behind} of {events} events behind an earlier one of the flush"

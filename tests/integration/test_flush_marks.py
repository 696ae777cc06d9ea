"""Format 1.1: the shim's flusher ends each periodic flush with a Flush mark, which lets the analyzer
order a trace without holding a second of events (docs/trace-format.md "Ordering")."""
from conftest import SCENARIOS

TIMED = {4, 5, 6, 7, 8, 14}  # records whose payload starts with time_ns
FIXED = {4, 5, 14}  # in a 2.x file: fixed layout, time_ns a u64 (little-endian) at offset 0
FLUSH = 16


def varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def records(path, with_thread=False):
    """(type, time_ns or None) of every record, in file order; with_thread: (type, time, thread)."""
    data = path.read_bytes()
    assert data[:8] == b"GMSTRACE"
    version = (data[8] | data[9] << 8, data[10] | data[11] << 8)
    assert version in {(1, 1), (2, 0)}, version
    fixed = version[0] >= 2
    pos = 16
    while pos < len(data):
        kind = data[pos]
        length, payload = varint(data, pos + 1)
        thread = None
        if fixed and kind in FIXED:
            time = int.from_bytes(data[payload:payload + 8], "little")
            thread = int.from_bytes(data[payload + 8:payload + 12], "little")
        elif kind in TIMED or kind == FLUSH:
            time, after = varint(data, payload)
            if kind != FLUSH and kind != 7:  # every timed record but MemInfo: the thread next
                thread = varint(data, after)[0]
        else:
            time = None
        yield (kind, time, thread) if with_thread else (kind, time)
        pos = payload + length


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

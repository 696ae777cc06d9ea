"""A trace's records as (type, time_ns) in file order, read with no help from the project's code
(docs/trace-format.md): what the flush-mark checks walk, here and on the H200
(tests/gpu/check_torch.py)."""

TIMED = {4, 5, 6, 7, 8, 14}  # records whose payload starts with time_ns
FIXED = {4, 5, 14}  # in a 2.x file: fixed layout, time_ns a u64 (little-endian) at offset 0
FLUSH = 16
ALLOC = 4


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
        if payload + length > len(data):  # a killed process's last, partly written record
            break
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


def late_records(path):
    """How many timed records come after a flush mark whose time is later than theirs, and the
    number of marks: the shim's rule (shim/record/in_flight.h) is that there are none."""
    marks, late = [], 0
    for kind, time in records(path):
        if kind == FLUSH:
            marks.append(time)
        elif time is not None and marks and time < marks[-1]:
            late += 1
    return late, len(marks)

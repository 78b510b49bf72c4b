"""Bytes read from a connection, cut into lines.

One buffer, filled in place by ``recv_into``; lines are found with
``bytearray.find`` from where the last search stopped, so a line that
comes in many pieces is scanned once, and the lines one read brought are
taken without another system call.  Each line is copied once, out of the
buffer; what is left of an unfinished line moves to the front only when
room is needed.
"""

_CHUNK = 256 * 1024         # room asked of each read


class LineTooLong(Exception):
    """An unfinished line passed the buffer's bound."""


class LineBuffer:
    """Received bytes and the whole lines among them."""

    __slots__ = ("_buf", "_start", "_end", "_scan", "max_line")

    def __init__(self, max_line=None):
        """MAX_LINE: the longest line taken (bytes, newline excluded), or
        None for no bound (it may be changed later)."""
        self._buf = bytearray(_CHUNK)
        self._start = 0     # where the next line starts
        self._end = 0       # the end of what was received
        self._scan = 0      # no newline in [_start, _scan)
        self.max_line = max_line

    def __len__(self):
        """Bytes received and not yet taken as lines."""
        return self._end - self._start

    def next_line(self):
        """The next whole line (a bytearray, without its newline), or None
        when no whole line is buffered.  Raises LineTooLong when the
        unfinished line passed the bound."""
        i = self._buf.find(b"\n", self._scan, self._end)
        if i < 0:
            self._scan = self._end
            if self.max_line is not None and \
                    self._end - self._start > self.max_line:
                raise LineTooLong()
            return None
        if self.max_line is not None and i - self._start > self.max_line:
            raise LineTooLong()
        line = self._buf[self._start:i]
        self._start = self._scan = i + 1
        return line

    def has_line(self):
        """Is a whole line buffered?"""
        if self._buf.find(b"\n", self._scan, self._end) >= 0:
            return True
        self._scan = self._end
        return False

    def fill(self, read_into):
        """Call READ_INTO(memoryview) with the free room at the end of the
        buffer (making room first); it returns the bytes it wrote there.
        Returns that count."""
        self._make_room()
        with memoryview(self._buf) as view:
            with view[self._end:] as room:
                n = read_into(room)
        self._end += n
        return n

    def feed(self, data):
        """Append DATA (bytes) as if it had been read."""
        k = 0
        while k < len(data):
            k += self.fill(lambda room, k=k: _copy(room, data, k))

    def _make_room(self):
        """At least _CHUNK bytes free after _end: the unfinished line moves
        to the front, or the buffer doubles.  An empty buffer grown by a
        large answer goes back to its first size."""
        if self._start == self._end:
            self._start = self._end = self._scan = 0
            if len(self._buf) > 4 * _CHUNK:
                self._buf = bytearray(_CHUNK)
        if len(self._buf) - self._end >= _CHUNK:
            return
        keep = self._end - self._start
        if self._start > 0:
            self._buf[:keep] = self._buf[self._start:self._end]
            self._scan -= self._start
            self._start, self._end = 0, keep
        if len(self._buf) - self._end < _CHUNK:
            self._buf.extend(bytes(max(len(self._buf), _CHUNK)))


def _copy(room, data, k):
    """Copy DATA[K:] into ROOM as far as it goes; the bytes copied."""
    n = min(len(room), len(data) - k)
    room[:n] = data[k:k + n]
    return n

"""Newline-delimited framing (stdio), with a size limit, in linear time and without I/O."""

from __future__ import annotations

from typing import Final


class Oversized:
    """Marks a line that was longer than the limit and was dropped whole."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size  # bytes seen before the line was given up (at least the limit)

    def __repr__(self) -> str:
        return f"Oversized({self.size})"


class LineSplitter:
    """Split a byte stream into lines; blank lines are dropped.

    A line longer than ``limit`` bytes is dropped whole: its bytes are not kept past the limit,
    and :meth:`feed` yields one :class:`Oversized` in its place, so the peer can be told. Work is
    linear in the input: a line that arrives in many pieces is joined once, when it ends.
    """

    def __init__(self, limit: int) -> None:
        self.limit: Final = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._dropping = 0  # bytes of an oversized line seen so far (0: not dropping)

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        out: list[bytes | Oversized] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end == -1:
                self._pending(chunk, start, len(chunk))
                return out
            if self._dropping:
                out.append(Oversized(self._dropping + end - start))
                self._dropping = 0
            elif self._parts:
                self._pending(chunk, start, end)
                if self._dropping:  # this last piece took it over the limit
                    out.append(Oversized(self._dropping))
                    self._dropping = 0
                else:
                    line = b"".join(self._parts)
                    self._parts, self._size = [], 0
                    if line.strip():
                        out.append(line)
            elif end - start > self.limit:
                out.append(Oversized(end - start))
            elif end > start:
                line = chunk[start:end]
                if line.strip():
                    out.append(line)
            start = end + 1

    def _pending(self, chunk: bytes, start: int, end: int) -> None:
        """Keep ``chunk[start:end]`` as part of an unfinished line, or count it if dropping."""
        n = end - start
        if not n:
            return
        if self._dropping:
            self._dropping += n
            return
        if self._size + n > self.limit:
            self._dropping = self._size + n
            self._parts, self._size = [], 0
            return
        self._parts.append(chunk[start:end] if start or end != len(chunk) else chunk)
        self._size += n

    def rest(self) -> list[bytes | Oversized]:
        """What is left at end of input: a last line without a newline."""
        if self._dropping:
            size, self._dropping = self._dropping, 0
            return [Oversized(size)]
        line = b"".join(self._parts)
        self._parts, self._size = [], 0
        return [line] if line.strip() else []

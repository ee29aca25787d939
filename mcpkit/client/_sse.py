"""A Server-Sent Events decoder with no I/O: feed bytes, get events (WHATWG rules)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Event:
    event: str
    data: str
    id: str | None


class SseDecoder:
    """Incremental decoder. ``last_id`` and ``retry_ms`` follow the stream as it goes."""

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self.last_id: str | None = None
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> list[Event]:
        self._buf += chunk
        out: list[Event] = []
        while True:
            cut = _line_end(self._buf)
            if cut is None:
                return out
            end, skip = cut
            line = self._buf[:end].decode("utf-8", "replace")
            self._buf = self._buf[end + skip:]
            event = self._line(line)
            if event is not None:
                out.append(event)

    def _line(self, line: str) -> Event | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
            self.last_id = value
        elif name == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> Event | None:
        data, event, eid = self._data, self._event, self._id
        self._data, self._event, self._id = [], "", None
        if not data:
            return None
        return Event(event or "message", "\n".join(data), eid)


def _line_end(buf: bytes) -> tuple[int, int] | None:
    """Index of the first line ending and its length (CRLF, LF or a lone CR)."""
    lf = buf.find(b"\n")
    cr = buf.find(b"\r")
    if cr == -1 and lf == -1:
        return None
    if cr != -1 and (lf == -1 or cr < lf):
        if cr == len(buf) - 1:
            return None  # may be the first half of CRLF
        return (cr, 2) if buf[cr + 1:cr + 2] == b"\n" else (cr, 1)
    return lf, 1

"""What the console knows of a running server: an :class:`~mcpkit.server.observe.Observer` that
keeps the requests in flight, a ring of recent ones, a window of durations per tool, the open
sessions and streams, and tells each console viewer as things happen.

Everything is bounded: the recent ring, each tool's window, the number of tools and sessions
listed, and each viewer's queue (a viewer that stops reading is dropped, never waited for).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections import deque
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Iterator

import msgspec
import trio

from ....server.observe import Observer, RequestRecord

#: recent requests kept (newest last)
RECENT = 200
#: durations kept per tool for p50/p99
WINDOW = 256
#: tools with statistics of their own; calls to names past it are counted under OTHER
MAX_TOOLS = 500
OTHER = "(other)"
#: sessions listed by id (all are counted)
MAX_SESSIONS = 200
#: events one viewer may fall behind by before it is dropped (two per call: about 5,000 calls a
#: second while its stream is written every 0.1 s)
VIEWER_QUEUE = 1024
#: in-flight requests listed (all are counted)
MAX_INFLIGHT = 200
#: characters kept of a name a client chose (tool, client name): the ring's size stays bounded
MAX_TEXT = 256


_NOTHING: AbstractContextManager[None] = nullcontext()


def _short(text: str | None) -> str | None:
    """What a client names (tool, client name) is kept up to MAX_TEXT characters."""
    return text if text is None or len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def percentile(ordered: list[float], q: float) -> float:
    """The nearest-rank percentile ``q`` (0..1) of sorted ``ordered`` (not empty)."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def tool_stats(windows: dict[str, list[float]], counts: dict[str, list[int]]) -> dict[str, dict[str, Any]]:
    """Per tool: calls, errors, and p50/p99 (ms) over the durations in its window."""
    out = {}
    for name, (calls, errors) in counts.items():
        ordered = sorted(windows.get(name) or [])
        row: dict[str, Any] = {"calls": calls, "errors": errors, "window": len(ordered)}
        if ordered:
            row["p50_ms"] = round(percentile(ordered, 0.5) * 1000, 2)
            row["p99_ms"] = round(percentile(ordered, 0.99) * 1000, 2)
        out[name] = row
    return out


class Viewer:
    """One open ``/console/events`` stream: a bounded queue of encoded SSE events."""

    def __init__(self) -> None:
        self.send, self.receive = trio.open_memory_channel[bytes](VIEWER_QUEUE)
        #: cancelled when the viewer is dropped (it may be stuck writing to a client that stopped reading)
        self.scope = trio.CancelScope()
        self.dropped = False


def sse(event: str, data: Any) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + msgspec.json.encode(data) + b"\n\n"


class ConsoleObserver(Observer):
    """The console's view of this process (see the module docstring)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.inflight: dict[int, dict[str, Any]] = {}
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT)
        self.windows: dict[str, deque[float]] = {}
        self.counts: dict[str, list[int]] = {}  # tool -> [calls, errors]
        self.sessions: dict[str, dict[str, Any]] = {}
        self.open_sessions = 0
        self.streams = 0
        self.refusals: dict[str, int] = {}  # reason -> count (the method rejected() fills it)
        self.viewers: set[Viewer] = set()
        self.dropped_viewers = 0
        #: raised on every change (the workers' snapshot is written when it moved)
        self.version = 0
        self._seq = 0

    # -- the Observer interface -------------------------------------------------------------------
    def request(self, rec: RequestRecord) -> AbstractContextManager[None]:
        self._seq += 1
        entry = {"id": f"{self.pid}-{self._seq}", "method": _short(rec.method), "target": _short(rec.target),
                 "transport": rec.transport, "session": rec.session_id, "client": _short(rec.client_name),
                 "started": time.time(), "worker": self.pid}
        self.inflight[id(rec)] = entry
        self._changed("call", entry, "start")
        return _NOTHING  # the call is registered here; ended() takes it out

    def ended(self, rec: RequestRecord) -> None:
        entry = self.inflight.pop(id(rec), None)
        if entry is None:
            return
        entry["duration_ms"] = round(rec.duration * 1000, 2)
        entry["outcome"] = rec.error_type or "ok"
        self.recent.append(entry)
        target = entry["target"]
        if rec.method == "tools/call" and target is not None:
            name = target if target in self.counts or len(self.counts) < MAX_TOOLS else OTHER
            window = self.windows.get(name)
            if window is None:
                window = self.windows[name] = deque(maxlen=WINDOW)
                self.counts[name] = [0, 0]
            window.append(rec.duration)
            self.counts[name][0] += 1
            if rec.error_type is not None:
                self.counts[name][1] += 1
        self._changed("call", entry, "end")

    def session_opened(self, transport: str, session_id: str | None) -> None:
        self.open_sessions += 1
        if session_id is not None and len(self.sessions) < MAX_SESSIONS:
            self.sessions[session_id] = {"id": session_id, "transport": transport, "opened": time.time(),
                                         "worker": self.pid}
        self._changed("sessions", {"open": self.open_sessions})

    def session_closed(self, transport: str, session_id: str | None, seconds: float) -> None:
        self.open_sessions = max(0, self.open_sessions - 1)
        if session_id is not None:
            self.sessions.pop(session_id, None)
        self._changed("sessions", {"open": self.open_sessions})

    def stream_opened(self, transport: str) -> None:
        self.streams += 1
        self._changed("streams", {"open": self.streams})

    def stream_closed(self, transport: str) -> None:
        self.streams = max(0, self.streams - 1)
        self._changed("streams", {"open": self.streams})

    def rejected(self, reason: str, transport: str) -> None:
        if reason in self.refusals or len(self.refusals) < 50:
            self.refusals[reason] = self.refusals.get(reason, 0) + 1
        self._changed("rejected", {"reason": reason})

    # -- what the console reads --------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """This process's live state, as plain data (what a worker writes for the others too)."""
        inflight = sorted(self.inflight.values(), key=lambda e: e["started"])
        return {
            "worker": self.pid,
            "inflight": inflight[:MAX_INFLIGHT],
            "inflight_count": len(inflight),
            "recent": list(self.recent),
            "windows": {name: list(w) for name, w in self.windows.items()},
            "counts": {name: list(c) for name, c in self.counts.items()},
            "sessions": list(self.sessions.values()),
            "open_sessions": self.open_sessions,
            "streams": self.streams,
            "rejected": dict(self.refusals),
        }

    # -- viewers ------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def watch(self) -> Iterator[Viewer]:
        viewer = Viewer()
        self.viewers.add(viewer)
        try:
            yield viewer
        finally:
            self.viewers.discard(viewer)
            viewer.send.close()

    def push(self, event: str, data: Any) -> None:
        """Tell every viewer; one whose queue is full stopped reading: it is dropped."""
        if not self.viewers:
            return
        frame = sse(event, data)
        for viewer in list(self.viewers):
            try:
                viewer.send.send_nowait(frame)
            except trio.WouldBlock:
                self.drop(viewer)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.viewers.discard(viewer)

    def drop(self, viewer: Viewer) -> None:
        viewer.dropped = True
        self.dropped_viewers += 1
        self.viewers.discard(viewer)
        viewer.send.close()
        viewer.scope.cancel()

    def _changed(self, event: str, data: Any, phase: str | None = None) -> None:
        self.version += 1
        if self.viewers:  # the event is made only when someone watches
            self.push(event, {**data, "phase": phase} if phase else data)

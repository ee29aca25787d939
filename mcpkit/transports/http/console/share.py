"""The console with ``--workers N``: one view of the deployment, whichever worker answers.

Each worker keeps its own live state (calls in flight, recent calls, durations, sessions,
tasks it runs). With several workers the supervising process makes one small folder for the
deployment before it starts them (its path in ``MCPKIT_CONSOLE_SHARE``, inherited); every
worker writes its snapshot there once a second (``<pid>.json``, replaced atomically), and the
worker that answers the page merges its own live state with the others' snapshots: a view at
most about a second old for what runs elsewhere, each entry labelled with its worker's pid. A
snapshot not renewed for ``STALE_S`` (a worker that died) is left out and removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import msgspec

from .observer import RECENT, tool_stats

ENV = "MCPKIT_CONSOLE_SHARE"
#: how often a worker writes its snapshot
EVERY_S = 1.0
#: a snapshot older than this is a worker that is gone
STALE_S = 5.0


@contextlib.contextmanager
def shared_folder(settings: Any) -> Iterator[str | None]:
    """In the supervising process of ``--workers``: the deployment's folder while they run."""
    if not settings.console or settings.workers <= 1:
        yield None
        return
    folder = tempfile.mkdtemp(prefix="mcpkit-console-")
    os.environ[ENV] = folder
    try:
        yield folder
    finally:
        os.environ.pop(ENV, None)
        shutil.rmtree(folder, ignore_errors=True)


class WorkerShare:
    """One worker's side of the folder."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)
        self.pid = os.getpid()
        self.mine = self.folder / f"{self.pid}.json"

    @classmethod
    def from_env(cls) -> "WorkerShare | None":
        folder = os.environ.get(ENV)
        return cls(folder) if folder and os.path.isdir(folder) else None

    def write(self, snapshot: dict[str, Any]) -> None:
        tmp = self.folder / f".{self.pid}.tmp"
        tmp.write_bytes(msgspec.json.encode(snapshot))
        os.replace(tmp, self.mine)

    def others(self) -> list[dict[str, Any]]:
        """The other workers' snapshots that are fresh (stale ones are removed)."""
        out = []
        now = time.time()
        for path in self.folder.glob("*.json"):
            if path == self.mine:
                continue
            try:
                if now - path.stat().st_mtime > STALE_S:
                    path.unlink(missing_ok=True)
                    continue
                out.append(msgspec.json.decode(path.read_bytes()))
            except (OSError, msgspec.DecodeError):
                continue  # replaced or removed while read: next time
        return out

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.mine.unlink()


def merge(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    """One view of several workers' snapshots (the first is the answering worker's)."""
    inflight = sorted((e for s in snapshots for e in s["inflight"]), key=lambda e: e["started"])
    recent = sorted((e for s in snapshots for e in s["recent"]), key=lambda e: e["started"] + e["duration_ms"] / 1000)
    windows: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}
    rejected: dict[str, int] = {}
    for s in snapshots:
        for name, w in s["windows"].items():
            windows.setdefault(name, []).extend(w)
        for name, (calls, errors) in s["counts"].items():
            c = counts.setdefault(name, [0, 0])
            c[0] += calls
            c[1] += errors
        for reason, n in s["rejected"].items():
            rejected[reason] = rejected.get(reason, 0) + n
    return {
        "worker": snapshots[0]["worker"],
        "workers": sorted(s["worker"] for s in snapshots),
        "inflight": inflight,
        "inflight_count": sum(s["inflight_count"] for s in snapshots),
        "recent": recent[-RECENT:],
        "tools": tool_stats(windows, counts),
        "sessions": [e for s in snapshots for e in s["sessions"]],
        "open_sessions": sum(s["open_sessions"] for s in snapshots),
        "streams": sum(s["streams"] for s in snapshots),
        "rejected": rejected,
        "tasks": sorted((t for s in snapshots for t in s.get("tasks", [])), key=lambda t: t["created_at"]),
    }

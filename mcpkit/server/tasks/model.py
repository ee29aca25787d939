"""Tasks (the ``io.modelcontextprotocol/tasks`` extension): the record a store keeps, and the
shapes it takes on the wire (CreateTaskResult, DetailedTask)."""

from __future__ import annotations

import os
import secrets
import socket
import time
from datetime import datetime, timezone
from typing import Any, Literal, Union

import msgspec

from ...protocol import jsonrpc

TERMINAL = frozenset({"completed", "failed", "cancelled"})
Status = Literal["working", "input_required", "completed", "failed", "cancelled"]


class TaskRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What a store keeps of one task. Times are seconds since the epoch."""

    task_id: str
    owner: str  # who may see it: a principal's key, a stdio connection, or "anonymous"
    tool: str
    status: Status = "working"
    status_message: Union[str, None] = None
    created_at: float
    updated_at: float
    ttl_ms: Union[int, None]
    poll_interval_ms: int
    runner: str  # the process running it: host:pid:start (see this_runner)
    result: Union[dict[str, Any], None] = None
    error: Union[dict[str, Any], None] = None
    input_requests: Union[dict[str, Any], None] = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def expires_at(self) -> float:
        return float("inf") if self.ttl_ms is None else self.created_at + self.ttl_ms / 1000

    def fail(self, message: str, now: float) -> None:
        """Mark the task failed from outside its run (its runner is gone): an internal error."""
        self.status, self.status_message, self.updated_at = "failed", message, now
        self.error, self.input_requests = {"code": jsonrpc.INTERNAL_ERROR, "message": message}, None

    def envelope(self) -> dict[str, Any]:
        """The Task fields every shape carries."""
        out: dict[str, Any] = {"taskId": self.task_id, "status": self.status}
        if self.status_message:
            out["statusMessage"] = self.status_message
        out["createdAt"] = iso(self.created_at)
        out["lastUpdatedAt"] = iso(self.updated_at)
        out["ttlMs"] = self.ttl_ms
        out["pollIntervalMs"] = self.poll_interval_ms
        return out

    def detailed(self) -> dict[str, Any]:
        """The DetailedTask of tasks/get and notifications/tasks."""
        out = self.envelope()
        if self.status == "completed" and self.result is not None:
            out["result"] = self.result
        elif self.status == "failed" and self.error is not None:
            out["error"] = self.error
        elif self.status == "input_required":
            out["inputRequests"] = self.input_requests or {}
        return out


def iso(t: float) -> str:
    """ISO 8601 in UTC with milliseconds, as the wire wants (``2026-11-23T10:30:00.123Z``)."""
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def new_task_id() -> str:
    """192 random bits, URL-safe: an id nobody can guess."""
    return secrets.token_urlsafe(24)


def _proc_start_time(pid: int | str) -> str | None:
    """When a process started (clock ticks since boot), to tell it from a later one that got the
    same pid; None when it is gone (or there is no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _start_time() -> str:
    return _proc_start_time(os.getpid()) or str(int(time.time()))


_RUNNER = f"{socket.gethostname()}:{os.getpid()}:{_start_time()}"


def this_runner() -> str:
    return _RUNNER if _RUNNER.split(":")[1] == str(os.getpid()) else _refresh_runner()


def _refresh_runner() -> str:
    """After a fork the pid changed: name this process anew."""
    global _RUNNER
    _RUNNER = f"{socket.gethostname()}:{os.getpid()}:{_start_time()}"
    return _RUNNER


def runner_alive(runner: str) -> bool | None:
    """Is the process named by ``runner`` still running? None when it is on another host
    (this process cannot tell)."""
    host, _, rest = runner.partition(":")
    pid_s, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid_s.isdigit():
        return None
    return _proc_start_time(pid_s) == started

"""Where tasks are kept: one small interface, an in-memory store (tests, throwaway servers) and
the durable default on SQLite (``sqlite_store.py``); a Redis store can follow.

The process that runs a task (its *runner*) is the only writer of its status and result. Other
processes (``--workers``) reach a task they do not run through the store: they record a cancel
request or input responses, and the runner collects them (:meth:`TaskStore.signals`).
"""

from __future__ import annotations

from typing import Any, Protocol

from .model import TERMINAL, TaskRecord, runner_alive


class TaskStore(Protocol):
    async def open(self) -> None:
        """Get ready (create tables, connect)."""

    async def close(self) -> None: ...

    async def create(self, record: TaskRecord) -> None:
        """Keep a new task; when this returns the task is durable (tasks/get finds it)."""

    async def save(self, record: TaskRecord) -> None:
        """Store the runner's latest view of a task."""

    async def load(self, task_id: str) -> TaskRecord | None: ...

    async def count_live(self, owner: str | None = None) -> int:
        """Tasks not yet terminal (of ``owner``, or of everyone)."""

    async def request_cancel(self, task_id: str) -> None:
        """Ask the runner (maybe another process) to cancel the task."""

    async def deliver_inputs(self, task_id: str, responses: dict[str, Any]) -> None:
        """Hand input responses to the runner (maybe another process)."""

    async def signals(self, runner: str) -> list[tuple[str, bool, dict[str, Any]]]:
        """Cancel requests and input responses left for ``runner``'s tasks, taken:
        ``[(task_id, cancel_requested, responses)]``."""

    async def live_runners(self) -> list[str]:
        """The runners of tasks that are not terminal (to find tasks whose process died)."""

    async def runner_gone(self, runner: str) -> bool:
        """Is that process known to have stopped?"""

    async def fail_tasks_of(self, runner: str, message: str, now: float) -> int:
        """Mark every non-terminal task of ``runner`` (a process that is gone) failed."""

    async def purge(self, now: float) -> int:
        """Delete tasks whose TTL has passed."""


class MemoryTaskStore:
    """Tasks in a dict: nothing survives the process. For tests and throwaway servers."""

    def __init__(self) -> None:
        self._tasks: dict[str, TaskRecord] = {}
        self._signals: dict[str, tuple[bool, dict[str, Any]]] = {}

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def create(self, record: TaskRecord) -> None:
        self._tasks[record.task_id] = record

    async def save(self, record: TaskRecord) -> None:
        if record.task_id in self._tasks:
            self._tasks[record.task_id] = record

    async def load(self, task_id: str) -> TaskRecord | None:
        return self._tasks.get(task_id)

    async def count_live(self, owner: str | None = None) -> int:
        return sum(1 for t in self._tasks.values() if t.status not in TERMINAL and (owner is None or t.owner == owner))

    async def request_cancel(self, task_id: str) -> None:
        cancel, inputs = self._signals.get(task_id, (False, {}))
        self._signals[task_id] = (True, inputs)

    async def deliver_inputs(self, task_id: str, responses: dict[str, Any]) -> None:
        cancel, inputs = self._signals.get(task_id, (False, {}))
        self._signals[task_id] = (cancel, {**inputs, **responses})

    async def signals(self, runner: str) -> list[tuple[str, bool, dict[str, Any]]]:
        out = [(tid, c, i) for tid, (c, i) in self._signals.items()
               if tid in self._tasks and self._tasks[tid].runner == runner]
        for tid, _, _ in out:
            del self._signals[tid]
        return out

    async def live_runners(self) -> list[str]:
        return sorted({t.runner for t in self._tasks.values() if t.status not in TERMINAL})

    async def runner_gone(self, runner: str) -> bool:
        return runner_alive(runner) is False

    async def fail_tasks_of(self, runner: str, message: str, now: float) -> int:
        n = 0
        for t in self._tasks.values():
            if t.runner == runner and t.status not in TERMINAL:
                t.fail(message, now)
                n += 1
        return n

    async def purge(self, now: float) -> int:
        gone = [tid for tid, t in self._tasks.items() if t.expires_at() <= now]
        for tid in gone:
            del self._tasks[tid]
            self._signals.pop(tid, None)
        return len(gone)

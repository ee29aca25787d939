"""The durable default task store: one SQLite file (``<data dir>/tasks.sqlite3``).

Every call runs in a worker thread, one at a time, on one connection in WAL mode with
``synchronous=NORMAL``: a committed task survives the process being killed (not a power cut).
Several processes (``--workers``, a restart) may share the file.
"""

from __future__ import annotations

import math
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

import msgspec
import trio

from .model import TaskRecord, runner_alive

T = TypeVar("T")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    status TEXT NOT NULL,
    runner TEXT NOT NULL,
    expires_at REAL,
    record BLOB NOT NULL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    inbox BLOB
);
CREATE INDEX IF NOT EXISTS tasks_live ON tasks(status, runner);
CREATE INDEX IF NOT EXISTS tasks_owner ON tasks(owner, status);
CREATE INDEX IF NOT EXISTS tasks_expiry ON tasks(expires_at);
CREATE INDEX IF NOT EXISTS tasks_signals ON tasks(runner) WHERE cancel_requested = 1 OR inbox IS NOT NULL;
"""
_LIVE = "status IN ('working', 'input_required')"
_encode = msgspec.json.Encoder().encode
_decode_record = msgspec.json.Decoder(TaskRecord).decode
_decode_inbox = msgspec.json.Decoder(dict[str, Any]).decode


def _use_wal(conn: sqlite3.Connection, attempts: int = 50) -> None:
    """Switch the file to WAL. Two servers opening one new store at once can find it locked
    while the other sets it up (SQLite does not wait on every lock a journal-mode change
    takes), so a busy answer is retried for a few seconds rather than failing the start."""
    for attempt in range(attempts):
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.1)


class SqliteTaskStore:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._one = trio.CapacityLimiter(1)

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        if conn is None:
            raise RuntimeError("the task store is not open")
        return await trio.to_thread.run_sync(fn, conn, limiter=self._one)

    async def open(self) -> None:
        def connect() -> sqlite3.Connection:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
            _use_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            return conn

        self._conn = await trio.to_thread.run_sync(connect)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await trio.to_thread.run_sync(conn.close, limiter=self._one)

    async def create(self, record: TaskRecord) -> None:
        row = (record.task_id, record.owner, record.status, record.runner, _expiry(record), _encode(record))
        await self._run(lambda c: c.execute(
            "INSERT INTO tasks (task_id, owner, status, runner, expires_at, record) VALUES (?, ?, ?, ?, ?, ?)", row))

    async def save(self, record: TaskRecord) -> None:
        row = (record.status, record.runner, _expiry(record), _encode(record), record.task_id)
        await self._run(lambda c: c.execute(
            "UPDATE tasks SET status = ?, runner = ?, expires_at = ?, record = ? WHERE task_id = ?", row))

    async def load(self, task_id: str) -> TaskRecord | None:
        row = await self._run(lambda c: c.execute("SELECT record FROM tasks WHERE task_id = ?", (task_id,)).fetchone())
        return None if row is None else _decode_record(row[0])

    async def count_live(self, owner: str | None = None) -> int:
        if owner is None:
            sql, args = f"SELECT count(*) FROM tasks WHERE {_LIVE}", ()
        else:
            sql, args = f"SELECT count(*) FROM tasks WHERE owner = ? AND {_LIVE}", (owner,)
        return int((await self._run(lambda c: c.execute(sql, args).fetchone()))[0])

    async def request_cancel(self, task_id: str) -> None:
        await self._run(lambda c: c.execute("UPDATE tasks SET cancel_requested = 1 WHERE task_id = ?", (task_id,)))

    async def deliver_inputs(self, task_id: str, responses: dict[str, Any]) -> None:
        def merge(c: sqlite3.Connection) -> None:
            with c:  # one transaction: read, merge, write
                c.execute("BEGIN IMMEDIATE")
                row = c.execute("SELECT inbox FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
                if row is None:
                    return
                inbox = _decode_inbox(row[0]) if row[0] else {}
                c.execute("UPDATE tasks SET inbox = ? WHERE task_id = ?", (_encode({**inbox, **responses}), task_id))

        await self._run(merge)

    async def signals(self, runner: str) -> list[tuple[str, bool, dict[str, Any]]]:
        def take(c: sqlite3.Connection) -> list[tuple[str, bool, dict[str, Any]]]:
            with c:
                c.execute("BEGIN IMMEDIATE")
                rows = c.execute("SELECT task_id, cancel_requested, inbox FROM tasks WHERE runner = ? "
                                 "AND (cancel_requested = 1 OR inbox IS NOT NULL)", (runner,)).fetchall()
                if rows:
                    c.executemany("UPDATE tasks SET cancel_requested = 0, inbox = NULL WHERE task_id = ?",
                                  [(r[0],) for r in rows])
            return [(r[0], bool(r[1]), _decode_inbox(r[2]) if r[2] else {}) for r in rows]

        return await self._run(take)

    async def live_runners(self) -> list[str]:
        rows = await self._run(lambda c: c.execute(f"SELECT DISTINCT runner FROM tasks WHERE {_LIVE}").fetchall())
        return [r[0] for r in rows]

    async def runner_gone(self, runner: str) -> bool:
        return runner_alive(runner) is False  # a file store is shared by one host's processes

    async def fail_tasks_of(self, runner: str, message: str, now: float) -> int:
        def fail(c: sqlite3.Connection) -> int:
            with c:
                c.execute("BEGIN IMMEDIATE")
                rows = c.execute(f"SELECT record FROM tasks WHERE runner = ? AND {_LIVE}", (runner,)).fetchall()
                for (raw,) in rows:
                    rec = _decode_record(raw)
                    rec.fail(message, now)
                    c.execute("UPDATE tasks SET status = 'failed', record = ? WHERE task_id = ?", (_encode(rec), rec.task_id))
            return len(rows)

        return await self._run(fail)

    async def purge(self, now: float) -> int:
        cur = await self._run(lambda c: c.execute("DELETE FROM tasks WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,)))
        return cur.rowcount


def _expiry(record: TaskRecord) -> float | None:
    t = record.expires_at()
    return None if math.isinf(t) else t

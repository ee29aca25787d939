"""SQLite storage: schema, connections, start-up checks and index-run records.

One database file holds every project. File contents live once, in an FTS5
table with the trigram tokenizer (`detail=none`: only which rows contain a
trigram is stored, which keeps the index small and fast to build). The
database runs in WAL mode so readers keep their snapshot while an index run
writes. A run stages new rows (`live=0`) in short transactions and makes them
visible, replacing the old rows, in one final transaction; rows staged by a
run that died are removed by the next run of the same project.
"""

import contextlib
import datetime as _dt
import os
import sqlite3
from pathlib import Path

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS projects(
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    root TEXT NOT NULL,
    source TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS files(
    id INTEGER PRIMARY KEY,
    project_id INTEGER NOT NULL REFERENCES projects(id),
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER,
    blob TEXT,
    indexed_at REAL NOT NULL,
    skipped TEXT,
    live INTEGER NOT NULL DEFAULT 1,
    run_id INTEGER,
    UNIQUE(project_id, live, path)
);
CREATE INDEX IF NOT EXISTS files_by_time ON files(indexed_at);
CREATE VIRTUAL TABLE IF NOT EXISTS content USING fts5(
    text, tokenize='trigram', detail=none, columnsize=0
);
CREATE TABLE IF NOT EXISTS runs(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project TEXT NOT NULL,
    root TEXT NOT NULL,
    ref TEXT,
    started_at REAL NOT NULL,
    finished_at REAL,
    status TEXT NOT NULL,
    files_added INTEGER NOT NULL DEFAULT 0,
    files_updated INTEGER NOT NULL DEFAULT 0,
    files_removed INTEGER NOT NULL DEFAULT 0,
    files_unchanged INTEGER NOT NULL DEFAULT 0,
    files_skipped INTEGER NOT NULL DEFAULT 0,
    phase TEXT NOT NULL DEFAULT 'starting',
    files_done INTEGER NOT NULL DEFAULT 0,
    files_total INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    pid INTEGER NOT NULL
);
"""


class StoreError(RuntimeError):
    """The database cannot be used (missing SQLite feature, unreadable file, ...)."""


def check_fts5_trigram() -> None:
    """Fail with a clear message unless this SQLite has FTS5 and its trigram tokenizer."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='trigram', detail=none)")
    except sqlite3.Error as exc:
        raise StoreError(
            "codesearch needs SQLite with FTS5 and the trigram tokenizer (SQLite >= 3.34); "
            f"this Python uses SQLite {sqlite3.sqlite_version}: {exc}"
        ) from exc
    finally:
        conn.close()


def connect(path: Path | str, *, busy_timeout_ms: int = 30_000) -> sqlite3.Connection:
    """Open (and create if needed) the database at `path` in WAL mode."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000,
                               check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"cannot open codesearch database {path}: {exc}") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        conn.execute("PRAGMA page_size=16384")  # only takes effect for a new database
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"cannot switch {path} to WAL mode (got {mode!r})")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        _ensure_schema(conn)
    except sqlite3.Error as exc:
        conn.close()
        raise StoreError(f"cannot use codesearch database {path}: {exc}") from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _ensure_schema(conn: sqlite3.Connection) -> None:
    row = None
    with contextlib.suppress(sqlite3.OperationalError):  # a fresh database has no meta table
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if row is not None:
        if int(row[0]) != SCHEMA_VERSION:
            raise StoreError(f"unsupported codesearch schema version {row[0]}")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def iso_time(ts: float | None) -> str | None:
    """Seconds since the epoch -> ISO 8601 UTC text (None stays None)."""
    if ts is None:
        return None
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).isoformat(timespec="milliseconds")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def mark_stale_runs(conn: sqlite3.Connection, live_run_ids: set[int], now: float) -> None:
    """Mark runs left 'running' by a dead process (crash, SIGKILL) as 'interrupted'.

    A run of this process that is not in `live_run_ids` is stale too (its
    thread died with the transaction rolled back).
    """
    rows = conn.execute("SELECT id, pid FROM runs WHERE status='running'").fetchall()
    me = os.getpid()
    stale = [
        run_id for run_id, pid in rows
        if (pid == me and run_id not in live_run_ids) or (pid != me and not _pid_alive(pid))
    ]
    if stale:
        conn.executemany(
            "UPDATE runs SET status='interrupted', finished_at=?, "
            "error='the indexing process stopped before the run finished' "
            "WHERE id=? AND status='running'",
            [(now, run_id) for run_id in stale],
        )


def begin_run(conn: sqlite3.Connection, project: str, root: str, ref: str | None,
              now: float, live_run_ids: set[int]) -> int:
    """Record a new run as 'running' and return its id.

    Refuses while another live run indexes the same project.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        mark_stale_runs(conn, live_run_ids, now)
        busy = conn.execute(
            "SELECT id FROM runs WHERE project=? AND status='running'", (project,)).fetchone()
        if busy is not None:
            raise StoreError(
                f"project {project!r} is already being indexed (run {busy[0]}); "
                "wait for it to finish (see index_status)")
        cur = conn.execute(
            "INSERT INTO runs(project, root, ref, started_at, status, pid) "
            "VALUES(?, ?, ?, ?, 'running', ?)",
            (project, root, ref, now, os.getpid()),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return int(cur.lastrowid or 0)


def fail_run(conn: sqlite3.Connection, run_id: int, error: str, now: float) -> None:
    conn.execute(
        "UPDATE runs SET status='failed', finished_at=?, error=? WHERE id=?",
        (now, error[:2000], run_id),
    )

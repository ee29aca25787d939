"""One index run: list a source, compare with the stored state, write the changes.

New and changed files are staged as invisible rows (`live=0`) in short
transactions; one final transaction swaps them in, drops replaced and removed
rows and marks the run completed. A crash or SIGKILL before that leaves the
previous complete state searchable; the next run deletes the stale staged
rows and starts over.
"""

import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from .models import IndexResult
from .sources import Entry, Source, SourceError, open_source

_T = TypeVar("_T")


@dataclass
class RunProgress:
    """Live state of a run; the indexer updates it and calls the progress callback."""

    run_id: int
    project: str
    root: str
    ref: str | None
    started_at: float
    phase: str = "starting"
    done: int = 0
    total: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {
        "files_added": 0, "files_updated": 0, "files_removed": 0,
        "files_unchanged": 0, "files_skipped": 0,
    })


ProgressCallback = Callable[[RunProgress], None]


@dataclass(frozen=True)
class Limits:
    """What one run may take on: per file, files listed, bytes read."""

    max_file_size: int
    max_files: int
    max_index_bytes: int


#: Kernel pseudo-filesystems: their "files" can block for ever (/proc/kmsg) or never end.
PSEUDO_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))


def _under(path: Path, top: Path) -> bool:
    return path == top or top in path.parents


@dataclass
class IndexJob:
    """A validated request: resolved root, chosen source and project name."""

    root: Path
    project: str
    ref: str | None
    source: Source


def prepare(repository: str, ref: str | None = None, project: str | None = None,
            roots: Sequence[Path] | None = None) -> IndexJob:
    """Validate the request; raises SourceError with a clear message.

    With `roots`, the repository must be one of them or lie below one (after resolving
    symlinks), and so must every directory git would read it from (see gitsafe.locate);
    kernel pseudo-filesystems are refused always."""
    if not repository or "\0" in repository:
        raise SourceError("repository must be a non-empty path")
    root = Path(repository).expanduser()
    try:
        root = root.resolve(strict=True)
    except (OSError, RuntimeError):
        raise SourceError(f"repository path does not exist: {repository}") from None
    if not root.is_dir():
        raise SourceError(f"repository path is not a directory: {repository}")
    if any(_under(root, p) for p in PSEUDO_ROOTS):
        raise SourceError(f"{root} is on a kernel pseudo-filesystem (/proc, /sys, /dev): it cannot be indexed")
    if roots is not None and not any(_under(root, r) for r in roots):
        allowed = ", ".join(str(r) for r in roots) or "none"
        raise SourceError(f"{root} is outside the directories this server may index ({allowed}); "
                          "the server's operator can add it to [plugins.codesearch] roots")
    name = project if project is not None else root.name
    if not name or "/" in name or name.strip() != name or len(name) > 200:
        raise SourceError(
            f"invalid project name {name!r}: use 1-200 characters without '/' "
            "or surrounding spaces"
        )
    return IndexJob(root=root, project=name, ref=ref, source=open_source(root, ref, roots))


def _utf8_ok(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _skip_reason(data: bytes | None, limit: int) -> str | None:
    if data is None:
        return "unreadable"
    if len(data) > limit:
        return "too-large"
    if b"\0" in data:
        return "binary"
    return None


def prefetch(items: Iterator[_T], depth: int = 64) -> Generator[_T, None, None]:
    """Produce `items` in a helper thread so reading files overlaps SQLite's work."""
    box: queue.Queue[tuple[bool, object]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(message: tuple[bool, object]) -> bool:
        while not stop.is_set():
            try:
                box.put(message, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    return
            put((False, None))
        except BaseException as exc:  # handed to the consumer
            put((False, exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()  # e.g. stops a `git cat-file` process early

    worker = threading.Thread(target=produce, name="codesearch-read", daemon=True)
    worker.start()
    try:
        while True:
            more, value = box.get()
            if not more:
                if value is not None:
                    raise value  # type: ignore[misc]
                return
            yield value  # type: ignore[misc]
    finally:
        stop.set()
        worker.join(timeout=5)


BATCH_FILES = 500
BATCH_BYTES = 16 * 1024 * 1024

# (id, size, mtime_ns, blob, skipped) of a live row, by path
Previous = dict[str, tuple[int, int, int | None, str | None, str | None]]


class _tx:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on error."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")


def _prepare_project(conn: sqlite3.Connection, job: IndexJob) -> tuple[int, bool, Previous]:
    """Create the project if new, drop rows staged by dead runs, load the live state."""
    with _tx(conn):
        row = conn.execute("SELECT id, root FROM projects WHERE name=?",
                           (job.project,)).fetchone()
        if row is None:
            project_id = conn.execute(
                "INSERT INTO projects(name, root, source, updated_at) VALUES(?, ?, ?, ?)",
                (job.project, str(job.root), job.source.describe(), time.time())).lastrowid
            same_root = True
        else:
            project_id, same_root = row[0], row[1] == str(job.root)
        stale = [r[0] for r in conn.execute(
            "SELECT id FROM files WHERE project_id=? AND live=0 AND skipped IS NULL",
            (project_id,))]
        conn.executemany("DELETE FROM content WHERE rowid=?", [(i,) for i in stale])
        conn.execute("DELETE FROM files WHERE project_id=? AND live=0", (project_id,))
        previous: Previous = {
            path: (fid, size, mtime, blob, skipped)
            for fid, path, size, mtime, blob, skipped in conn.execute(
                "SELECT id, path, size, mtime_ns, blob, skipped FROM files "
                "WHERE project_id=? AND live=1", (project_id,))
        }
    return int(project_id or 0), same_root, previous


def _save_progress(conn: sqlite3.Connection, run: RunProgress) -> None:
    c = run.counts
    conn.execute(
        "UPDATE runs SET phase=?, files_done=?, files_total=?, files_added=?, files_updated=?, "
        "files_removed=?, files_unchanged=?, files_skipped=? WHERE id=?",
        (run.phase, run.done, run.total, c["files_added"], c["files_updated"],
         c["files_removed"], c["files_unchanged"], c["files_skipped"], run.run_id))


def _load(to_read: list[tuple[Entry, bool]], blobs: Iterator[bytes | None], limit: int,
          ) -> Iterator[tuple[Entry, bool, str | None, str | None]]:
    """(entry, had content, skip reason, decoded text) for each file to read."""
    for (entry, had), data in zip(to_read, blobs, strict=True):
        reason = _skip_reason(data, limit)
        if reason is not None or data is None:
            yield entry, had, reason, None
        else:
            yield entry, had, None, data.decode("utf-8", "replace")


def _stage(conn: sqlite3.Connection, run: RunProgress, project_id: int, stamp: float,
           pending: Iterator[tuple[Entry, bool, str | None, str | None]],
           staged_rows: list[tuple[Entry, str | None, str | None]],
           notify: ProgressCallback | None) -> None:
    """Write files as invisible rows in batches of BATCH_FILES files / BATCH_BYTES text."""
    c = run.counts
    while True:
        batch_rows = staged_rows
        staged_rows = []
        size = 0
        for entry, had, reason, text in pending:
            run.done += 1
            batch_rows.append((entry, text, reason))
            if text is None:
                c["files_skipped"] += 1
                c["files_removed"] += had
            else:
                c["files_updated" if had else "files_added"] += 1
                size += len(text)
            if len(batch_rows) >= BATCH_FILES or size >= BATCH_BYTES:
                break
        if not batch_rows:
            break
        with _tx(conn):
            next_id = int(conn.execute("SELECT coalesce(max(id), 0) FROM files").fetchone()[0])
            ids = range(next_id + 1, next_id + 1 + len(batch_rows))
            conn.executemany(
                "INSERT INTO files(id, project_id, path, size, mtime_ns, blob, indexed_at, "
                "skipped, live, run_id) VALUES(?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
                [(i, project_id, e.path, e.size, e.mtime_ns, e.blob, stamp, reason, run.run_id)
                 for i, (e, _, reason) in zip(ids, batch_rows, strict=True)])
            conn.executemany(
                "INSERT INTO content(rowid, text) VALUES(?, ?)",
                [(i, text) for i, (_, text, _) in zip(ids, batch_rows, strict=True)
                 if text is not None])
            _save_progress(conn, run)
        if notify:
            notify(run)


def execute(conn: sqlite3.Connection, job: IndexJob, run: RunProgress, limits: Limits,
            notify: ProgressCallback | None = None) -> IndexResult:
    """Run the job on a write connection; the run row must already exist."""
    max_file_size = limits.max_file_size
    c = run.counts
    run.phase = "listing"
    if notify:
        notify(run)
    listed = job.source.list(limits.max_files + 1)
    if len(listed) > limits.max_files:
        raise SourceError(f"{job.root} holds more than {limits.max_files} files; index a smaller directory, "
                          "or raise [plugins.codesearch] max_files")
    entries = [e for e in listed if _utf8_ok(e.path)]
    c["files_skipped"] += len(listed) - len(entries)
    run.total = len(listed)
    project_id, same_root, previous = _prepare_project(conn, job)

    to_read: list[tuple[Entry, bool]] = []  # (entry, the old row had content)
    too_large: list[Entry] = []
    replaced: list[tuple[int, bool]] = []  # live rows to drop: (id, has content)
    for entry in entries:
        prev = previous.pop(entry.path, None)
        big = entry.size > max_file_size
        if prev is not None:
            if (same_root and prev[1:4] == (entry.size, entry.mtime_ns, entry.blob)
                    and (prev[4] == "too-large") == big):
                c["files_unchanged" if prev[4] is None else "files_skipped"] += 1
                continue
            replaced.append((prev[0], prev[4] is None))
        if big:
            too_large.append(entry)
            c["files_skipped"] += 1
            c["files_removed"] += prev is not None and prev[4] is None
        else:
            to_read.append((entry, prev is not None and prev[4] is None))
    to_read_bytes = sum(e.size for e, _ in to_read)
    if to_read_bytes > limits.max_index_bytes:
        raise SourceError(f"{job.root} needs {to_read_bytes} bytes read, over the {limits.max_index_bytes} "
                          "bytes a run may read; index a smaller directory, or raise "
                          "[plugins.codesearch] max_index_bytes")
    gone = list(previous.values())
    c["files_removed"] += sum(1 for p in gone if p[4] is None)
    replaced.extend((p[0], p[4] is None) for p in gone)
    run.done = run.total - len(to_read)
    run.phase = "indexing"
    if notify:
        notify(run)

    stamp = time.time()
    blobs = job.source.read([e for e, _ in to_read], max_file_size)
    pending = prefetch(_load(to_read, blobs, max_file_size))
    staged_rows: list[tuple[Entry, str | None, str | None]] = [
        (e, None, "too-large") for e in too_large]
    try:
        _stage(conn, run, project_id, stamp, pending, staged_rows, notify)
    finally:
        pending.close()  # stops the reader thread if staging failed

    run.phase = "committing"
    if notify:
        notify(run)
    with _tx(conn):
        conn.executemany("DELETE FROM content WHERE rowid=?",
                         [(i,) for i, has in replaced if has])
        conn.executemany("DELETE FROM files WHERE id=?", [(i,) for i, _ in replaced])
        conn.execute("UPDATE files SET live=1, run_id=NULL WHERE project_id=? AND live=0 "
                     "AND run_id=?", (project_id, run.run_id))
        finished = time.time()
        conn.execute("UPDATE projects SET root=?, source=?, updated_at=? WHERE id=?",
                     (str(job.root), job.source.describe(), finished, project_id))
        run.phase = "done"
        _save_progress(conn, run)
        conn.execute("UPDATE runs SET status='completed', finished_at=? WHERE id=?",
                     (finished, run.run_id))
    if notify:
        notify(run)
    return IndexResult(
        run_id=run.run_id, project=job.project, status="completed",
        duration_ms=int((finished - run.started_at) * 1000), **c,
    )


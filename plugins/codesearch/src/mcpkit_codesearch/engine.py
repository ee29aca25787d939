"""`CodeSearch`: the engine facade the plugin and the CLI use (no mcpkit here)."""

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from . import search as _search
from .indexer import IndexJob, Limits, RunProgress, execute, prepare
from .languages import guess_language
from .models import IndexResult, RecentFile, RecentFiles, RunStatus, SearchResult
from .query import QueryError
from .sources import SourceError
from .store import StoreError, begin_run, check_fts5_trigram, connect, fail_run, iso_time

DEFAULT_MAX_FILE_SIZE = 1024 * 1024
DEFAULT_MAX_FILES = 200_000
DEFAULT_MAX_INDEX_BYTES = 2 * 1024 * 1024 * 1024

# Errors whose message is meant for the caller (bad input, unusable repository or database).
UserError = (QueryError, SourceError, StoreError)


class CodeSearch:
    """Index repositories into one SQLite database and search them.

    Thread-safe: each thread gets its own read connection and each index run
    its own write connection.
    """

    def __init__(self, database: Path | str, *, max_file_size: int = DEFAULT_MAX_FILE_SIZE,
                 max_files: int = DEFAULT_MAX_FILES, max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES,
                 ) -> None:
        check_fts5_trigram()
        if not isinstance(max_file_size, int) or max_file_size < 1:
            raise StoreError("max_file_size must be a positive number of bytes")
        self.database = Path(database).expanduser()
        self.limits = Limits(max_file_size, max_files, max_index_bytes)
        self.max_file_size = max_file_size
        self._idle: list[sqlite3.Connection] = []  # read connections not in use
        self._state = threading.Lock()
        self._live: dict[int, RunProgress] = {}
        self._threads: dict[int, threading.Thread] = {}

    # -- connections -----------------------------------------------------------------
    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A read connection from the pool, back to it afterwards. Worker threads come and
        go (trio retires idle ones), so connections belong to the pool, not to a thread:
        there are never more than the calls running at once."""
        with self._state:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = connect(self.database)
        try:
            yield conn
        finally:
            with self._state:
                self._idle.append(conn)

    def close(self, wait: float = 10.0) -> None:
        """Wait a little for background runs, then close the read connections.

        The engine stays usable: later calls open new connections.
        """
        with self._state:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(wait)
        with self._state:
            readers, self._idle = self._idle, []
        for conn in readers:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    # -- indexing --------------------------------------------------------------------
    def _begin(self, repository: str, ref: str | None, project: str | None,
               roots: Sequence[Path] | None) -> tuple[IndexJob, RunProgress]:
        job = prepare(repository, ref, project, roots)
        now = time.time()
        with self._state:
            live = set(self._live)
        with self._reading() as conn:
            run_id = begin_run(conn, job.project, str(job.root), ref, now, live)
        run = RunProgress(run_id, job.project, str(job.root), ref, now)
        with self._state:
            self._live[run_id] = run
        return job, run

    def _run(self, job: IndexJob, run: RunProgress,
             notify: Callable[[RunProgress], None] | None) -> IndexResult:
        try:
            conn = connect(self.database, busy_timeout_ms=120_000)
            conn.execute("PRAGMA cache_size=-65536")  # 64 MiB while merging FTS segments
            try:
                return execute(conn, job, run, self.limits, notify)
            finally:
                conn.close()
        except BaseException as exc:
            try:
                conn2 = connect(self.database)
                try:
                    fail_run(conn2, run.run_id, f"{type(exc).__name__}: {exc}", time.time())
                finally:
                    conn2.close()
            except Exception:
                pass
            raise
        finally:
            with self._state:
                self._live.pop(run.run_id, None)

    def index(self, repository: str, *, ref: str | None = None, project: str | None = None,
              progress: Callable[[RunProgress], None] | None = None,
              roots: Sequence[Path] | None = None) -> IndexResult:
        """Index `repository` (a directory, a git work tree, or a commit with `ref`) and wait.

        With `roots`, the repository must lie under one of them."""
        job, run = self._begin(repository, ref, project, roots)
        return self._run(job, run, progress)

    def start_index(self, repository: str, *, ref: str | None = None,
                    project: str | None = None, roots: Sequence[Path] | None = None) -> IndexResult:
        """Validate, then index in a background thread; returns at once (status 'running')."""
        job, run = self._begin(repository, ref, project, roots)

        def work() -> None:
            try:
                self._run(job, run, None)
            except Exception:
                pass
            finally:
                with self._state:
                    self._threads.pop(run.run_id, None)

        thread = threading.Thread(target=work, name=f"codesearch-run-{run.run_id}", daemon=True)
        with self._state:
            self._threads[run.run_id] = thread
        thread.start()
        return IndexResult(run_id=run.run_id, project=job.project, status="running")

    def wait(self, run_id: int, timeout: float | None = None) -> RunStatus:
        with self._state:
            thread = self._threads.get(run_id)
        if thread is not None:
            thread.join(timeout)
        return self.status(run_id)

    def status(self, run_id: int) -> RunStatus:
        """Progress of a run: live numbers from this process, else the recorded ones."""
        with self._state:
            run = self._live.get(run_id)
            live = None if run is None else (run.phase, run.done, run.total, dict(run.counts))
        with self._reading() as conn:
            row = conn.execute(
                "SELECT project, root, ref, started_at, finished_at, status, phase, files_done, "
                "files_total, files_added, files_updated, files_removed, files_unchanged, "
                "files_skipped, error FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None:
            raise QueryError(f"unknown index run {run_id}")
        project, root, ref, started, finished, status, phase, done, total = row[:9]
        counts = dict(zip(("files_added", "files_updated", "files_removed",
                           "files_unchanged", "files_skipped"), row[9:14], strict=True))
        if status == "running" and live is not None:
            phase, done, total, counts = live
        return RunStatus(
            run_id=run_id, project=project, root=root, ref=ref, status=status, phase=phase,
            files_done=done, files_total=total, started_at=iso_time(started) or "",
            finished_at=iso_time(finished),
            duration_ms=None if finished is None else int((finished - started) * 1000),
            error=row[14], **counts,
        )

    # -- queries ---------------------------------------------------------------------
    def search(self, term: str, *, project: str | None = None, path: str | None = None,
               limit: int = 20, case_sensitive: bool = False, regex: bool = False,
               ) -> SearchResult:
        with self._reading() as conn:
            return _search.search(conn, term, project=project, path=path, limit=limit,
                                  case_sensitive=case_sensitive, regex=regex)

    def recent_files(self, limit: int = 20, project: str | None = None) -> RecentFiles:
        if not isinstance(limit, int) or not 1 <= limit <= 500:
            raise QueryError("limit must be between 1 and 500")
        sql = ("SELECT p.name, f.path, f.indexed_at, f.size FROM files f "
               "JOIN projects p ON p.id=f.project_id WHERE f.live=1 AND f.skipped IS NULL")
        args: list[object] = []
        if project is not None:
            sql += " AND p.name=?"
            args.append(project)
        sql += " ORDER BY f.indexed_at DESC, p.name, f.path LIMIT ?"
        args.append(limit)
        with self._reading() as conn:
            _search.check_project(conn, project)
            rows = conn.execute(sql, args).fetchall()
        return RecentFiles(files=[
            RecentFile(project=name, path=rel, indexed_at=iso_time(at) or "", size=size,
                       language=guess_language(rel))
            for name, rel, at, size in rows
        ])

    def read_file(self, project: str, path: str) -> str | None:
        """The indexed text of `path` in `project`, or None if it is not indexed."""
        if not project or not path or path.startswith("/") or "\0" in path:
            return None
        if any(part in ("", ".", "..") for part in path.split("/")):
            return None
        with self._reading() as conn:
            row = conn.execute(
                "SELECT c.text FROM files f JOIN projects p ON p.id=f.project_id "
                "JOIN content c ON c.rowid=f.id "
                "WHERE p.name=? AND f.path=? AND f.live=1 AND f.skipped IS NULL",
                (project, path)).fetchone()
        return None if row is None else row[0]

    def projects(self) -> list[str]:
        with self._reading() as conn:
            return _search.project_names(conn)

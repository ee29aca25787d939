"""mcpkit wiring: tools, the `code://` resource template, lifespan and CLI commands.

Everything heavy lives in the engine (`CodeSearch`); this module only maps
arguments, errors and progress onto mcpkit's public API.
"""

import contextlib
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import mcpkit
import msgspec

from .engine import CodeSearch, UserError
from .indexer import RunProgress
from .models import IndexResult, RecentFiles, RunStatus, SearchResult
from .settings import Settings, SettingsError, resolve

_engines: dict[tuple[str, int, int, int], CodeSearch] = {}
_engines_lock = threading.Lock()


def settings_for(config: dict[str, Any]) -> Settings:
    try:
        return resolve(config or {})
    except SettingsError as exc:
        raise ValueError(f"codesearch: {exc}") from None


def engine_for(config: dict[str, Any]) -> CodeSearch:
    """One engine per database and limits, shared by the hooks of a process."""
    s = settings_for(config)
    try:
        key = (str(s.database), s.max_file_size, s.max_files, s.max_index_bytes)
        with _engines_lock:
            if key not in _engines:
                _engines[key] = CodeSearch(s.database, max_file_size=s.max_file_size, max_files=s.max_files,
                                           max_index_bytes=s.max_index_bytes)
            return _engines[key]
    except UserError as exc:
        raise ValueError(f"codesearch: {exc}") from None


class _Progress:
    """Throttled, strictly increasing progress notifications from the worker thread."""

    def __init__(self, ctx: mcpkit.Context | None) -> None:
        self.ctx = ctx
        self.sent = -1.0
        self.at = 0.0
        self.phase = ""

    def __call__(self, run: RunProgress) -> None:
        if self.ctx is None:
            return
        self.ctx.sync.check_cancelled()  # timed out, the client left, or the task was cancelled
        now = time.monotonic()
        value = float(run.done)
        if value <= self.sent and run.phase == self.phase:
            return
        if run.phase == self.phase and now - self.at < 0.2:
            return
        if value <= self.sent:
            value = self.sent + 0.001  # progress must grow even when only the phase moves
        self.sent, self.at, self.phase = value, now, run.phase
        total = float(run.total) if run.total else None
        message = f"{run.phase}: {run.done}/{run.total} files" if run.total else run.phase
        with contextlib.suppress(Exception):  # a client that went away must not stop the run
            self.ctx.sync.report_progress(value, total, message)


Term = Annotated[str, msgspec.Meta(min_length=1, max_length=500,
                                   description="Text to find (a Python regex with regex=true)")]
Limit = Annotated[int, msgspec.Meta(ge=1, le=500, description="Maximum number of results")]
ProjectName = Annotated[str, msgspec.Meta(min_length=1, max_length=200,
                                          description="Project name (default: all projects)")]


def build_tools(engine: CodeSearch, roots: tuple[Path, ...] = ()) -> list[Any]:
    """The tools; index_repository reads only under ``roots``."""
    @mcpkit.tool(annotations={"readOnlyHint": False, "destructiveHint": False,
                              "idempotentHint": True, "openWorldHint": False}, timeout=3600.0, task="optional")
    def index_repository(
        repository: Annotated[str, msgspec.Meta(
            min_length=1, max_length=4096,
            description="Path of a local directory or git repository on the server machine")],
        ref: Annotated[str, msgspec.Meta(
            min_length=1, max_length=256,
            description="Git commit, branch or tag to index instead of the work tree",
        )] | None = None,
        project: Annotated[str, msgspec.Meta(
            min_length=1, max_length=200,
            description="Name to index under (default: the directory name)")] | None = None,
        wait: Annotated[bool, msgspec.Meta(
            description="Wait for the run to finish; false returns the run id at once")] = True,
        ctx: mcpkit.Context | None = None,
    ) -> IndexResult:
        """Index a local directory or git repository for search_code (incremental).

        In a git work tree the files `git ls-files` lists are indexed (.gitignore is
        respected); with `ref`, that commit's tree is read without checking it out.
        Binary files, files over the size limit, virtualenvs, node_modules and .git are
        skipped. Unchanged files are not re-read and deleted files disappear. Only
        directories under the server's allowed roots can be indexed, and a repository whose
        git data lies outside them is refused.
        """
        try:
            if not wait:
                return engine.start_index(repository, ref=ref, project=project, roots=roots)
            return engine.index(repository, ref=ref, project=project, progress=_Progress(ctx), roots=roots)
        except UserError as exc:
            raise mcpkit.ToolError(str(exc)) from None

    @mcpkit.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
    def index_status(
        run_id: Annotated[int, msgspec.Meta(ge=1, description="Id returned by index_repository")],
    ) -> RunStatus:
        """Report the state and progress of an index run.

        Status is running, completed, failed or interrupted (the process died mid-run).
        """
        try:
            return engine.status(run_id)
        except UserError as exc:
            raise mcpkit.ToolError(str(exc)) from None

    @mcpkit.tool(annotations={"readOnlyHint": True, "openWorldHint": False}, timeout=60.0)
    def search_code(
        term: Term,
        project: ProjectName | None = None,
        path: Annotated[str, msgspec.Meta(
            min_length=1, max_length=1000,
            description="Glob on the path relative to the project root, e.g. '*.py' or 'src/**'",
        )] | None = None,
        limit: Limit = 20,
        case_sensitive: bool = False,
        regex: Annotated[bool, msgspec.Meta(
            description="Treat term as a Python regular expression, matched per line")] = False,
    ) -> SearchResult:
        """Find lines containing a string (or matching a regex) in indexed repositories.

        Results are ordered by project, path and line; `line` and `column` are 1-based
        and count like `grep -n`. `total` counts every matching line, `truncated` says
        whether more exist than returned.
        """
        try:
            return engine.search(term, project=project, path=path, limit=limit,
                                 case_sensitive=case_sensitive, regex=regex)
        except UserError as exc:
            raise mcpkit.ToolError(str(exc)) from None

    @mcpkit.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
    def list_recent_files(limit: Limit = 20, project: ProjectName | None = None) -> RecentFiles:
        """List the most recently (re)indexed files, newest first, with size and language."""
        try:
            return engine.recent_files(limit, project)
        except UserError as exc:
            raise mcpkit.ToolError(str(exc)) from None

    return [index_repository, index_status, search_code, list_recent_files]


def build_resources(engine: CodeSearch) -> list[Any]:
    @mcpkit.resource("code://{project}/{path}", name="code-file", mime_type="text/plain",
                     description="Text of an indexed file: code://PROJECT/PATH/RELATIVE/TO/ROOT")
    def read_code(project: str, path: str) -> str:
        text = engine.read_file(project, path)
        if text is None:
            raise mcpkit.ResourceNotFound(f"code://{project}/{path}")
        return text

    return [read_code]


@contextlib.asynccontextmanager
async def _lifespan(engine: CodeSearch) -> AsyncIterator[None]:
    try:
        engine.projects()  # opens the database now: a bad path fails at start-up
    except UserError as exc:
        raise RuntimeError(f"codesearch: {exc}") from None
    try:
        yield
    finally:
        engine.close(wait=0)


@mcpkit.hookimpl
def mcpkit_tools(config: dict[str, Any]) -> list[Any]:
    return build_tools(engine_for(config), settings_for(config).roots)


@mcpkit.hookimpl
def mcpkit_resources(config: dict[str, Any]) -> list[Any]:
    return build_resources(engine_for(config))


@mcpkit.hookimpl
def mcpkit_lifespan(config: dict[str, Any]) -> Any:
    return _lifespan(engine_for(config))


@mcpkit.hookimpl
def mcpkit_cli_commands() -> list[Any]:
    from .cli import index_command, search_command

    return [index_command, search_command]

"""Result types shared by the engine, the MCP tools and the CLI.

They are msgspec Structs so that mcpkit can derive output schemas from the
tool return annotations; the engine itself only needs msgspec, not mcpkit.
"""

import msgspec


class IndexResult(msgspec.Struct, kw_only=True):
    """Outcome of one index run (or its start, when not waiting)."""

    run_id: int
    project: str
    status: str
    files_added: int = 0
    files_updated: int = 0
    files_removed: int = 0
    files_unchanged: int = 0
    files_skipped: int = 0
    duration_ms: int = 0


class RunStatus(msgspec.Struct, kw_only=True):
    """State of an index run, live while it is running, from the database after."""

    run_id: int
    project: str
    root: str
    ref: str | None
    status: str
    phase: str
    files_done: int
    files_total: int
    files_added: int = 0
    files_updated: int = 0
    files_removed: int = 0
    files_unchanged: int = 0
    files_skipped: int = 0
    started_at: str
    finished_at: str | None = None
    duration_ms: int | None = None
    error: str | None = None


class SearchHit(msgspec.Struct, kw_only=True):
    """One matching line; `line` and `column` are 1-based."""

    project: str
    path: str
    line: int
    column: int
    snippet: str
    context_before: list[str]
    context_after: list[str]


class SearchResult(msgspec.Struct, kw_only=True):
    """Matching lines in (project, path, line) order; `total` counts all matching lines."""

    results: list[SearchHit]
    total: int
    truncated: bool


class RecentFile(msgspec.Struct, kw_only=True):
    project: str
    path: str
    indexed_at: str
    size: int
    language: str | None


class RecentFiles(msgspec.Struct, kw_only=True):
    files: list[RecentFile]

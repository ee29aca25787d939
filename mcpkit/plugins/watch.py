"""Watching plugin files and folders for saves, on trio.

With the ``dev`` extra installed (``pip install 'mcpkit[dev]'``) the watcher is ``watchfiles``
(inotify, FSEvents, ReadDirectoryChangesW through anyio, which runs on trio); without it mcpkit
polls modification times every ``POLL_S`` seconds, which costs nothing for a one-file plugin and
a little for a large package folder.

A file plugin is watched through its folder (not recursively): editors that save by writing a
new file and renaming it over the old one replace the file the watch was on. What is not source
is left out: ``__pycache__``, hidden files, editor back-ups and swap files.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import AsyncIterator, Iterable

import trio

log = logging.getLogger("mcpkit.dev")
#: the polling watcher's interval, seconds
POLL_S = 0.05
#: quiet time after a change before it is reported (an editor's save is often several writes)
SETTLE_MS = 25
_SKIP_DIRS = {"__pycache__", ".git", ".hg", ".svn", ".mypy_cache", ".pytest_cache", ".ruff_cache", "node_modules"}


def is_source(path: Path) -> bool:
    """Not an editor's back-up, swap or lock file, not bytecode, not hidden."""
    name = path.name
    if name.startswith((".", "#")) or name.endswith(("~", ".swp", ".swx", ".swo", ".tmp", ".pyc")) or name == "4913":
        return False
    return not any(part in _SKIP_DIRS for part in path.parts)


def which(roots: dict[str, Path], changed: Iterable[Path]) -> set[str]:
    """The names (of ``roots``: name -> file or folder) whose root a changed path is in."""
    out: set[str] = set()
    for path in changed:
        if not is_source(path):
            continue
        for name, root in roots.items():
            if path == root or root in path.parents:
                out.add(name)
    return out


def backend() -> str:
    try:
        import watchfiles  # noqa: F401
    except ImportError:
        return "polling"
    return "watchfiles"


async def changes(roots: dict[str, Path], *, force_polling: bool = False) -> AsyncIterator[set[str]]:
    """Yield the names whose files changed, after each burst of saves settles."""
    if not force_polling and backend() == "watchfiles":
        async for names in _watchfiles(roots):
            yield names
    else:
        async for names in _polling(roots):
            yield names


async def _watchfiles(roots: dict[str, Path]) -> AsyncIterator[set[str]]:
    import watchfiles

    folders = {root for root in roots.values() if root.is_dir()}
    parents = {root.parent for root in roots.values() if not root.is_dir()} - folders
    # a folder is watched recursively; a file's folder only at its own level
    async with trio.open_nursery() as nursery:
        send, receive = trio.open_memory_channel[set[str]](16)

        async def follow(paths: set[Path], recursive: bool) -> None:
            async for batch in watchfiles.awatch(*paths, recursive=recursive, step=SETTLE_MS, debounce=1600,
                                                 rust_timeout=500, yield_on_timeout=False):
                names = which(roots, (Path(p) for _, p in batch))
                if names:
                    await send.send(names)

        if folders:
            nursery.start_soon(follow, folders, True)
        if parents:
            nursery.start_soon(follow, parents, False)
        async for names in receive:
            yield names


def _files(root: Path) -> list[Path]:
    if not root.is_dir():
        return [root]
    out: list[Path] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".")]
        out.extend(Path(folder) / name for name in names)
    return out


def snapshot(roots: dict[str, Path]) -> dict[Path, tuple[int, int]]:
    """(mtime, size) of every source file under ``roots``."""
    return _snapshot(roots)


def changed_since(roots: dict[str, Path], before: dict[Path, tuple[int, int]]) -> set[str]:
    """The names whose files differ from ``before`` (a save the watcher started too late to see)."""
    now = _snapshot(roots)
    return which(roots, {p for p in before.keys() | now.keys() if before.get(p) != now.get(p)})


def _snapshot(roots: dict[str, Path]) -> dict[Path, tuple[int, int]]:
    out: dict[Path, tuple[int, int]] = {}
    for root in roots.values():
        for path in _files(root):
            if is_source(path):
                try:
                    st = path.stat()
                except OSError:
                    continue  # gone between the listing and the look
                out[path] = (st.st_mtime_ns, st.st_size)
    return out


async def _polling(roots: dict[str, Path]) -> AsyncIterator[set[str]]:
    seen = await trio.to_thread.run_sync(_snapshot, roots)
    pending: set[Path] = set()
    while True:
        await trio.sleep(POLL_S)
        now = await trio.to_thread.run_sync(_snapshot, roots)
        moved = {p for p in seen.keys() | now.keys() if seen.get(p) != now.get(p)}
        seen = now
        if moved:
            pending |= moved  # still being written: wait for a quiet round
            continue
        if pending:
            names = which(roots, pending)
            pending = set()
            if names:
                yield names


__all__ = ["changes", "backend", "which", "is_source", "snapshot", "changed_since", "POLL_S"]

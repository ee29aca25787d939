"""Where files come from: a plain directory, a git work tree, or a git commit.

Each source lists entries without reading them (size + mtime, or blob id for
a commit) so an unchanged tree can be re-scanned quickly, and reads the bytes
of the entries the indexer asks for.
"""

import errno
import os
import stat
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from . import gitsafe
from .gitsafe import GitRepo, NotARepository, SourceError

EXCLUDED_DIRS = frozenset({".git", "node_modules"})
#: never walked into, even from "/": their files can block for ever or never end
PSEUDO_DIRS = frozenset({"/proc", "/sys", "/dev"})
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
VENV_MARKER = "pyvenv.cfg"

__all__ = ["CommitSource", "DirectorySource", "Entry", "Source", "SourceError", "WorkTreeSource", "open_source"]


@dataclass(slots=True)
class Entry:
    path: str  # relative to the indexed root, '/'-separated
    size: int
    mtime_ns: int | None  # work trees and directories
    blob: str | None  # commits


def _as_regular_file(fd: int, path: str) -> BinaryIO:
    """A file object for `fd` if it is a regular file; anything else (a FIFO, a device) is refused
    with OSError, without blocking (it was opened with O_NONBLOCK)."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"not a regular file: {path}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class Beneath:
    """Stats and opens paths below `root` one component at a time, never following a symlink and
    never leaving `root`. A path git lists comes from an index anyone can write: it may be
    absolute, hold '..', or cross a directory that is now a symlink to elsewhere.

    Keeps the directory descriptors of the last path open, so a run of files in one directory
    costs one open each."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._chain: list[tuple[str, int]] = []  # (name, fd) from root down

    def __enter__(self) -> "Beneath":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        while self._chain:
            os.close(self._chain.pop()[1])

    def _dir_fd(self, rel: str) -> tuple[int, str]:
        """The descriptor of `rel`'s directory and `rel`'s last component."""
        *dirs, name = rel.split("/")
        if name in ("", ".", "..") or any(part in ("", ".", "..") for part in dirs):
            raise OSError(errno.EINVAL, "not a plain relative path", rel)
        if not self._chain:
            self._chain.append(("", os.open(self.root, _DIR_FLAGS)))
        keep = 1
        while keep < len(self._chain) and keep <= len(dirs) and self._chain[keep][0] == dirs[keep - 1]:
            keep += 1
        while len(self._chain) > keep:
            os.close(self._chain.pop()[1])
        for part in dirs[keep - 1:]:
            self._chain.append((part, os.open(part, _DIR_FLAGS, dir_fd=self._chain[-1][1])))
        return self._chain[-1][1], name

    def lstat(self, rel: str) -> os.stat_result:
        fd, name = self._dir_fd(rel)
        return os.stat(name, dir_fd=fd, follow_symlinks=False)

    def open(self, rel: str) -> BinaryIO:
        fd, name = self._dir_fd(rel)
        return _as_regular_file(os.open(name, _OPEN_FLAGS, dir_fd=fd), rel)


def _excluded_by_name(path: str) -> bool:
    return any(part in EXCLUDED_DIRS for part in path.split("/")[:-1])


def _venv_dirs(paths: Sequence[str]) -> list[str]:
    """Directory prefixes ('dir/') holding a pyvenv.cfg, the root itself excepted."""
    return [p[: -len(VENV_MARKER)] for p in paths if p.endswith("/" + VENV_MARKER)]


def _filter_listed(paths: Sequence[str]) -> list[str]:
    venvs = tuple(_venv_dirs(paths))
    return [p for p in paths if not _excluded_by_name(p) and not (venvs and p.startswith(venvs))]


class DirectorySource:
    """Every regular file under `root` (symlinks are not followed)."""

    kind = "directory"

    def __init__(self, root: Path) -> None:
        self.root = root

    def describe(self) -> str:
        return "directory"

    def list(self, limit: int | None = None) -> list[Entry]:
        """Regular files, at most `limit` of them (a longer listing stops there)."""
        out: list[Entry] = []
        stack: list[tuple[str, str]] = [("", str(self.root))]
        while stack and (limit is None or len(out) < limit):
            rel, absdir = stack.pop()
            try:
                with os.scandir(absdir) as it:
                    items = list(it)
            except OSError:
                continue
            if rel and any(e.name == VENV_MARKER for e in items):
                continue  # a virtualenv
            for e in items:
                try:
                    if e.is_symlink():
                        continue
                    if e.is_dir(follow_symlinks=False):
                        if e.name not in EXCLUDED_DIRS and e.path not in PSEUDO_DIRS:
                            stack.append((f"{rel}{e.name}/", e.path))
                    elif e.is_file(follow_symlinks=False):
                        st = e.stat(follow_symlinks=False)
                        out.append(Entry(rel + e.name, st.st_size, st.st_mtime_ns, None))
                except OSError:
                    continue
        return out

    def read(self, entries: Sequence[Entry], limit: int) -> Iterator[bytes | None]:
        """Yield each entry's bytes (None if it vanished, is unreadable or lies beyond a symlink)."""
        with Beneath(str(self.root)) as tree:
            for entry in entries:
                try:
                    with tree.open(entry.path) as fh:
                        head = fh.read(8192)
                        if b"\0" in head or len(head) < 8192:
                            data = head  # binary (the indexer checks) or complete
                        else:
                            data = head + fh.read(limit + 1 - len(head))
                except OSError:
                    data = None
                yield data


class WorkTreeSource(DirectorySource):
    """What `git ls-files` lists: tracked plus untracked-but-not-ignored files."""

    kind = "worktree"

    def __init__(self, root: Path, repo: GitRepo) -> None:
        super().__init__(root)
        self.repo = repo

    def describe(self) -> str:
        return "worktree"

    def list(self, limit: int | None = None) -> list[Entry]:
        raw = gitsafe.run(self.repo, self.root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
        paths = sorted({os.fsdecode(p) for p in raw.split(b"\0") if p})
        out: list[Entry] = []
        with Beneath(str(self.root)) as tree:
            for path in _filter_listed(paths):
                try:
                    st = tree.lstat(path)
                except OSError:
                    continue  # deleted, or not a plain path below the root (a crafted index)
                if stat.S_ISREG(st.st_mode):  # regular file only
                    out.append(Entry(path, st.st_size, st.st_mtime_ns, None))
        return out


class CommitSource:
    """The tree of one commit, read from the object store (nothing is checked out)."""

    kind = "ref"

    def __init__(self, root: Path, ref: str, repo: GitRepo) -> None:
        self.root = root
        self.ref = ref
        self.repo = repo
        try:
            self.commit = gitsafe.run(repo, root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        except SourceError:
            raise SourceError(f"unknown git ref {ref!r} in {root}") from None
        self.commit_id = self.commit.decode().strip()

    def describe(self) -> str:
        return f"ref:{self.commit_id}"

    def list(self, limit: int | None = None) -> list[Entry]:
        raw = gitsafe.run(self.repo, self.root, "ls-tree", "-r", "-z", "-l", self.commit_id)
        by_path: dict[str, Entry] = {}
        for record in raw.split(b"\0"):
            if not record:
                continue
            meta, _, path_b = record.partition(b"\t")
            mode, kind, oid, size = meta.split()
            if kind != b"blob" or mode not in (b"100644", b"100755"):
                continue  # symlinks, submodules
            path = os.fsdecode(path_b)
            by_path[path] = Entry(path, int(size), None, oid.decode())
        keep = _filter_listed(sorted(by_path))
        return [by_path[p] for p in keep]

    def read(self, entries: Sequence[Entry], limit: int) -> Iterator[bytes | None]:
        """Stream blobs through one `git cat-file --batch` process."""
        if not entries:
            return
        proc = gitsafe.start(self.repo, self.root, "cat-file", "--batch")
        assert proc.stdin is not None and proc.stdout is not None
        stdin, stdout = proc.stdin, proc.stdout

        def feed() -> None:
            try:
                for entry in entries:
                    stdin.write(f"{entry.blob}\n".encode())
                stdin.close()
            except (BrokenPipeError, ValueError, OSError):
                pass

        writer = threading.Thread(target=feed, name="codesearch-cat-file", daemon=True)
        writer.start()
        try:
            for _entry in entries:
                header = stdout.readline().split()
                if len(header) < 3 or header[1] != b"blob":
                    if not header:
                        raise SourceError("git cat-file stopped early")
                    yield None
                    continue
                data = stdout.read(int(header[2]))
                stdout.read(1)  # the newline after the object
                yield data[: limit + 1]
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            stdout.close()
            writer.join(timeout=5)


Source = DirectorySource | CommitSource


def open_source(root: Path, ref: str | None, roots: Sequence[Path] | None = None) -> Source:
    """The source for `root` (resolved): a commit with `ref`, else a work tree or a directory.

    Refuses (SourceError) a repository that reaches outside `roots`; a directory git would not
    take for a work tree (another user's, a broken `.git` file) is indexed as a plain directory."""
    if ref is not None and (not ref or ref.startswith("-") or "\0" in ref or "\n" in ref):
        raise SourceError(f"invalid git ref: {ref!r}")
    try:
        repo = gitsafe.locate(root, roots)
    except NotARepository as exc:
        if ref is not None:
            raise SourceError(f"{exc}; a ref needs a git repository") from None
        return DirectorySource(root)
    if ref is not None:
        return CommitSource(root, ref, repo)
    return WorkTreeSource(root, repo)

"""Where files come from: a plain directory, a git work tree, or a git commit.

Each source lists entries without reading them (size + mtime, or blob id for
a commit) so an unchanged tree can be re-scanned quickly, and reads the bytes
of the entries the indexer asks for.
"""

import os
import shutil
import stat
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

EXCLUDED_DIRS = frozenset({".git", "node_modules"})
#: never walked into, even from "/": their files can block for ever or never end
PSEUDO_DIRS = frozenset({"/proc", "/sys", "/dev"})
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
VENV_MARKER = "pyvenv.cfg"


class SourceError(ValueError):
    """The repository or ref cannot be indexed (clear message for the caller)."""


@dataclass(slots=True)
class Entry:
    path: str  # relative to the indexed root, '/'-separated
    size: int
    mtime_ns: int | None  # work trees and directories
    blob: str | None  # commits


def _git(root: Path, *args: str) -> bytes:
    if shutil.which("git") is None:
        raise SourceError("git is not installed, cannot read a git repository")
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True)
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip() or f"exit status {proc.returncode}"
        raise SourceError(f"git {args[0]} failed in {root}: {msg}")
    return proc.stdout


def _open_regular(path: str) -> BinaryIO:
    """Open a regular file for reading; anything else (a FIFO, a device, a symlink swapped in
    after listing) is refused with OSError, without blocking."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"not a regular file: {path}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def is_git_work_tree(root: Path) -> bool:
    if shutil.which("git") is None:
        return False
    proc = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"], capture_output=True
    )
    return proc.returncode == 0 and proc.stdout.strip() == b"true"


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
        """Yield each entry's bytes (None if it vanished or is unreadable)."""
        root = str(self.root)
        for entry in entries:
            try:
                with _open_regular(os.path.join(root, entry.path)) as fh:
                    head = fh.read(8192)
                    if b"\0" in head or len(head) < 8192:
                        yield head  # binary (the indexer checks) or complete
                    else:
                        yield head + fh.read(limit + 1 - len(head))
            except OSError:
                yield None


class WorkTreeSource(DirectorySource):
    """What `git ls-files` lists: tracked plus untracked-but-not-ignored files."""

    kind = "worktree"

    def describe(self) -> str:
        return "worktree"

    def list(self, limit: int | None = None) -> list[Entry]:
        raw = _git(self.root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
        paths = sorted({os.fsdecode(p) for p in raw.split(b"\0") if p})
        out: list[Entry] = []
        root = str(self.root)
        for path in _filter_listed(paths):
            try:
                st = os.lstat(os.path.join(root, path))
            except OSError:
                continue  # deleted in the work tree
            if (st.st_mode & 0o170000) == 0o100000:  # regular file only
                out.append(Entry(path, st.st_size, st.st_mtime_ns, None))
        return out


class CommitSource:
    """The tree of one commit, read from the object store (nothing is checked out)."""

    kind = "ref"

    def __init__(self, root: Path, ref: str) -> None:
        if not ref or ref.startswith("-") or "\0" in ref or "\n" in ref:
            raise SourceError(f"invalid git ref: {ref!r}")
        if not is_git_work_tree(root):
            raise SourceError(f"{root} is not inside a git work tree; a ref needs a git repository")
        self.root = root
        self.ref = ref
        try:
            self.commit = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        except SourceError:
            raise SourceError(f"unknown git ref {ref!r} in {root}") from None
        self.commit_id = self.commit.decode().strip()

    def describe(self) -> str:
        return f"ref:{self.commit_id}"

    def list(self, limit: int | None = None) -> list[Entry]:
        raw = _git(self.root, "ls-tree", "-r", "-z", "-l", self.commit_id)
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
        proc = subprocess.Popen(
            ["git", "-C", str(self.root), "cat-file", "--batch"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
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


def open_source(root: Path, ref: str | None) -> Source:
    if ref is not None:
        return CommitSource(root, ref)
    if is_git_work_tree(root):
        return WorkTreeSource(root)
    return DirectorySource(root)

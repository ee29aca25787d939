"""Git on repositories nobody vouches for: find them, check them, run git so they cannot run anything.

Whoever wrote the repository directory controls every byte of it, `.git/` included. Two things
must then never happen: git running a program the repository names (`core.fsmonitor`, hooks, a
promisor remote's `uploadpack` or `sshCommand`, pagers, credential helpers, filters, ...), and git
reading objects or files from outside the directories the server may index (a `.git` file saying
`gitdir: /elsewhere`, a symlinked `.git` or `objects`, `commondir`, `objects/info/alternates`, a
repository above the allowed root).

`locate` finds the repository the way git's discovery would, but without running git and never
looking above the allowed roots. With `roots` it resolves every directory git would read objects
from (the git dir, its common dir, the object directory, each alternate, symlinks inside the
object directories) and refuses the repository with a `SourceError` when one lies outside them.
It also applies git's ownership rule (safe.directory), which git itself skips once `GIT_DIR` is set.

`run` and `start` then run git with that repository pinned (`GIT_DIR`, `GIT_WORK_TREE`: no
discovery, `core.worktree` ignored), in an environment built from nothing (no inherited `GIT_*`
variable, no system or global config, `HOME` unusable, no transport protocol allowed, so a partial
clone cannot fetch lazily) and with `-c` settings, which outrank the repository's own config, for
every key that names a program. The commands codesearch runs (`ls-files`, `rev-parse`, `ls-tree`,
`cat-file --batch`) apply no filter, textconv or diff driver and write nothing.
"""

import codecs
import os
import shutil
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


class SourceError(ValueError):
    """The repository or ref cannot be indexed (clear message for the caller)."""


class NotARepository(Exception):
    """`locate` found no usable repository; the message says why (shown only when one was needed)."""


#: Settings given with -c: the command line outranks every config file, the repository's included.
OVERRIDES: tuple[str, ...] = (
    "core.fsmonitor=false",  # ls-files would run the named fsmonitor hook
    "core.hooksPath=/dev/null",  # no hook can be found there
    "core.pager=cat",
    "core.askPass=",
    "credential.helper=",  # an empty value empties the list of helpers
    "protocol.allow=never",  # GIT_ALLOW_PROTOCOL below outranks protocol.<name>.allow too
    "core.attributesFile=/dev/null",
    "core.untrackedCache=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "submodule.recurse=false",
)

#: `run` kills a git command that takes longer: a FIFO where git expects a file (config, index,
#: a .gitignore) blocks it for ever.
GIT_TIMEOUT_S = 300.0
#: Depth of alternates of alternates git follows.
MAX_ALTERNATE_DEPTH = 5
_GITFILE_MAX = 4096
_GITFILE_PREFIX = "gitdir: "


@dataclass(frozen=True, slots=True)
class GitRepo:
    """A repository checked by `locate`: every path is resolved (no symlink in it)."""

    work_tree: Path  # the directory holding `.git`
    git_dir: Path
    common_dir: Path


def _environment(repo: GitRepo) -> dict[str, str]:
    """The whole environment of a git process: nothing inherited but PATH."""
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": os.devnull,  # '~' in the repository's config leads nowhere
        "LC_ALL": "C",
        "GIT_DIR": str(repo.git_dir),
        "GIT_WORK_TREE": str(repo.work_tree),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_ALLOW_PROTOCOL": "",  # an empty allow-list: no transport at all
        "GIT_PROTOCOL_FROM_USER": "0",
        "GIT_NO_LAZY_FETCH": "1",  # git >= 2.45; GIT_ALLOW_PROTOCOL stops older ones
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "GIT_OPTIONAL_LOCKS": "0",
    }


def git_program() -> str:
    found = shutil.which("git")
    if found is None:
        raise SourceError("git is not installed, cannot read a git repository")
    return found


def _command(cwd: Path, args: Sequence[str]) -> list[str]:
    overrides = [part for setting in OVERRIDES for part in ("-c", setting)]
    return [git_program(), "--no-pager", *overrides, "-C", str(cwd), *args]


def run(repo: GitRepo, cwd: Path, *args: str) -> bytes:
    """Run one git command to the end; its output, or SourceError with git's message."""
    try:
        proc = subprocess.run(_command(cwd, args), capture_output=True, env=_environment(repo),
                              stdin=subprocess.DEVNULL, timeout=GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SourceError(f"git {args[0]} did not finish within {GIT_TIMEOUT_S:g} s in {cwd} "
                          "(is a file in the repository a FIFO, or its file system hung?)") from None
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip()[:2000] or f"exit status {proc.returncode}"
        raise SourceError(f"git {args[0]} failed in {cwd}: {msg}")
    return proc.stdout


def start(repo: GitRepo, cwd: Path, *args: str) -> "subprocess.Popen[bytes]":
    """Start a git command with pipes to its stdin and stdout (stderr discarded)."""
    return subprocess.Popen(_command(cwd, args), env=_environment(repo), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


# -- finding and checking the repository ------------------------------------------------------------

def _under(path: Path, top: Path) -> bool:
    return path == top or top in path.parents


class _Checker:
    """Refuses resolved paths outside `roots` (None: anything goes, the operator's own run)."""

    def __init__(self, root: Path, roots: Sequence[Path] | None) -> None:
        self.root = root
        self.roots = roots

    def allowed(self, path: Path) -> bool:
        return self.roots is None or any(_under(path, r) for r in self.roots)

    def inside(self, path: Path, what: str) -> Path:
        real = Path(os.path.realpath(path))
        if not self.allowed(real):
            allowed = ", ".join(str(r) for r in self.roots or ()) or "none"
            raise SourceError(
                f"{self.root} is refused: its {what} {real} is outside the directories this server "
                f"may index ({allowed}); git would read the repository from there")
        return real


def _owned(path: Path) -> bool:
    """git's ownership rule: a repository is trusted only when the server's user owns it."""
    try:
        return os.stat(path).st_uid == os.geteuid()
    except OSError:
        return False


def _read_regular(path: Path, limit: int) -> bytes:
    """Up to `limit` + 1 bytes of a regular file (OSError for a FIFO or a device, without blocking)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"not a regular file: {path}")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit + 1)
    finally:
        os.close(fd)


def _read_small(path: Path) -> str:
    data = _read_regular(path, _GITFILE_MAX)
    if len(data) > _GITFILE_MAX:
        raise NotARepository(f"{path} is too large to be a git pointer file")
    return data.decode("utf-8", "surrogateescape")


def _has_repository_layout(git_dir: Path, common_dir: Path) -> bool:
    """git's test for a repository directory: HEAD, and objects/ and refs/ in its common dir."""
    return (os.path.lexists(git_dir / "HEAD") and (common_dir / "objects").is_dir()
            and (common_dir / "refs").is_dir())


def _common_dir(git_dir: Path, check: _Checker) -> Path:
    """Where a git dir keeps objects and refs: itself, or what its `commondir` file names."""
    if not (git_dir / "commondir").is_file():
        return git_dir
    try:
        target = _read_small(git_dir / "commondir").strip()
    except OSError as exc:
        raise NotARepository(f"cannot read {git_dir}/commondir: {exc.strerror}") from None
    return check.inside(git_dir / target, "common git directory (commondir)")


def _git_dir_of(dotgit: Path, check: _Checker) -> Path | None:
    """The git dir a `.git` entry names (resolved and inside the roots), or None if it names none.

    A `.git` directory that is not a repository is passed over, as git does; a `.git` file that
    is broken stops the search (git gives up there too)."""
    if dotgit.is_dir():  # a directory, or a symlink to one
        git_dir = check.inside(dotgit, "git directory (.git)")
        return git_dir if _has_repository_layout(git_dir, _common_dir(git_dir, check)) else None
    if not dotgit.is_file():
        return None  # a dangling symlink, a FIFO...
    try:
        text = _read_small(dotgit)
    except OSError as exc:
        raise NotARepository(f"cannot read {dotgit}: {exc.strerror}") from None
    if not text.startswith(_GITFILE_PREFIX):
        raise NotARepository(f"{dotgit} is a file but not a 'gitdir: <path>' pointer")
    target = text[len(_GITFILE_PREFIX):].rstrip("\r\n\t ")
    if not target or "\0" in target:
        raise NotARepository(f"{dotgit} names no git directory")
    git_dir = check.inside(dotgit.parent / target, "git directory (from the .git file)")
    if not _has_repository_layout(git_dir, _common_dir(git_dir, check)):
        raise NotARepository(f"{dotgit} points to {git_dir}, which is not a git repository")
    return git_dir


def _alternates(objects: Path) -> list[Path]:
    """The object directories `objects/info/alternates` names (not resolved)."""
    try:
        lines = _read_regular(objects / "info" / "alternates", 1 << 20).split(b"\n")
    except OSError:
        return []
    out = []
    for line in lines:
        line = line.rstrip(b"\r")
        if not line or line.startswith(b"#"):
            continue
        if line.startswith(b'"'):  # a C-quoted path
            try:
                line = codecs.escape_decode(line[1:-1] if line.endswith(b'"') else line[1:])[0]
            except ValueError:
                raise SourceError(f"{objects}/info/alternates has a line git cannot read") from None
        out.append(objects / os.fsdecode(line))
    return out


def _check_object_dirs(common_dir: Path, check: _Checker) -> None:
    """The object directory, its alternates (recursively) and every symlink inside them."""
    pending = [(check.inside(common_dir / "objects", "object directory"), 0)]
    seen: set[Path] = set()
    while pending:
        objects, depth = pending.pop()
        if objects in seen:
            continue
        seen.add(objects)
        _check_links_inside(objects, check)
        if depth >= MAX_ALTERNATE_DEPTH:
            continue
        for alternate in _alternates(objects):
            pending.append((check.inside(alternate, "alternate object directory"), depth + 1))


def _check_links_inside(objects: Path, check: _Checker) -> None:
    """Symlinks two levels down (objects/xx/<object>, objects/pack/<pack>) must stay inside."""
    try:
        top = list(os.scandir(objects))
    except OSError:
        return
    for entry in top:
        if entry.is_symlink():
            check.inside(Path(entry.path), "object directory entry")
        if not entry.is_dir(follow_symlinks=False):
            continue
        try:
            with os.scandir(entry.path) as inner:
                for item in inner:
                    if item.is_symlink():
                        check.inside(Path(item.path), "object file")
        except OSError:
            continue


def _is_bare_git_dir(path: Path) -> bool:
    """A directory git would take for a bare repository (its commondir is not followed here)."""
    return path.name != ".git" and os.path.lexists(path / "HEAD") and (path / "refs").is_dir() and (
        (path / "objects").is_dir() or (path / "commondir").is_file())


def _device(path: Path) -> int | None:
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


def locate(root: Path, roots: Sequence[Path] | None = None) -> GitRepo:
    """The repository whose work tree holds `root` (a resolved directory).

    Looks for `.git` in `root` and its parents, staying inside `roots` and on one file system.
    Raises NotARepository when there is none (or git would not use it: a broken `.git` file,
    another user's repository, `root` inside a git directory), SourceError when the
    repository reaches outside `roots`."""
    check = _Checker(root, roots)
    device = os.stat(root).st_dev
    here = root
    while True:
        dotgit = here / ".git"
        git_dir = _git_dir_of(dotgit, check) if os.path.lexists(dotgit) else None
        if git_dir is not None:
            break
        if _is_bare_git_dir(here):
            raise NotARepository(f"{root} is inside the git directory {here}, not in a work tree")
        parent = here.parent
        if parent == here or not check.allowed(parent) or _device(parent) != device:
            raise NotARepository(f"{root} is not inside a git work tree")
        here = parent
    if _under(root, git_dir):
        raise NotARepository(f"{root} is inside the git directory {git_dir}, not in a work tree")
    for path in (here, dotgit, git_dir):
        if not _owned(path):
            raise NotARepository(
                f"{path} belongs to another user; git reads only repositories the server's user owns "
                "(safe.directory)")
    common_dir = _common_dir(git_dir, check)
    if roots is not None:
        _check_object_dirs(common_dir, check)
    return GitRepo(work_tree=here, git_dir=git_dir, common_dir=common_dir)

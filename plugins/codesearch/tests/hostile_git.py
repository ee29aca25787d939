"""Hostile git repositories, built on disk with a real git, for the tests and the fuzz campaign.

A scene is a directory with `allowed/` (the server's root), `outside/` (a sibling the server must
never read, holding repositories whose files say SECRET) and `markers/`. Every program a hostile
repository names is `touch markers/<name>`, so a file in `markers/` means git ran it. Each builder
makes one repository under `allowed/` and returns a `Case`: what to index, with which ref, and
whether the server must refuse it.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import struct
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

SECRET = "TOPSECRET-OUTSIDE-7f3a9c"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}
#: Config keys whose value git may run as a program (a shell command line), for any command.
PROGRAM_KEYS = (
    "core.fsmonitor", "core.pager", "pager.ls-files", "pager.ls-tree", "pager.cat-file",
    "pager.rev-parse", "core.editor", "sequence.editor", "core.askPass", "core.sshCommand",
    "core.gitProxy", "core.alternateRefsCommand", "diff.external", "diff.hostile.textconv",
    "diff.hostile.command", "filter.hostile.clean", "filter.hostile.smudge",
    "filter.hostile.process", "merge.hostile.driver", "gpg.program", "gpg.ssh.program",
    "uploadpack.packObjectsHook", "remote.origin.uploadpack", "remote.origin.receivepack",
    "credential.helper",
)
HOOKS = ("post-index-change", "reference-transaction", "pre-auto-gc", "post-checkout",
         "post-rewrite", "fsmonitor-watchman", "pre-commit", "post-merge", "push-to-checkout")


def git(repo: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}, check=check)
    return proc.stdout


def write(root: Path, rel: str, data: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data, encoding="utf-8")
    return path


def new_repo(repo: Path, files: dict[str, str]) -> str:
    """A repository with one commit of `files`; returns the commit id."""
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    for rel, text in files.items():
        write(repo, rel, text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    return git(repo, "rev-parse", "HEAD").strip()


@dataclass(frozen=True)
class Scene:
    base: Path
    allowed: Path
    outside: Path
    markers: Path
    secret_commit: str  # in outside/secret (packed) and outside/loose (loose objects)

    def command(self, name: str) -> str:
        """A shell command line that leaves the marker `name` behind, then fails."""
        return f"touch {shlex.quote(str(self.markers / name))}; false"

    def executions(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())


def make_scene(base: Path, above_root: bool = False) -> Scene:
    """With `above_root`, `base` itself is a repository (naming a program) whose commit holds
    `allowed/above.txt` with the secret: git run in `allowed/` would find and use it."""
    allowed, outside, markers = base / "allowed", base / "outside", base / "markers"
    for d in (allowed, outside, markers):
        d.mkdir(parents=True, exist_ok=True)
    if above_root:
        new_repo(base, {"allowed/above.txt": f"{SECRET} committed above the root\n"})
        write(allowed, "above.txt", "the work tree copy is harmless\n")
        git(base, "config", "core.fsmonitor", f"touch {shlex.quote(str(markers / 'above-root-fsmonitor'))}; false")
    files = {"s.txt": f"{SECRET} in a repository outside the roots\n"}
    commit = new_repo(outside / "secret", files)
    git(outside / "secret", "gc", "-q")  # packed
    assert new_repo(outside / "loose", files) == commit  # same tree, author and (fixed) dates: same id
    write(outside / "plain", "s.txt", f"{SECRET} in a plain file outside the roots\n")
    return Scene(base, allowed.resolve(), outside.resolve(), markers.resolve(), commit)


@dataclass(frozen=True)
class Case:
    name: str
    repository: Path
    ref: str | None
    roots: tuple[Path, ...]  # the server's roots: always (scene.allowed,)
    refused: bool | None  # True: must be refused; False: must be indexed; None: either


def name_programs(scene: Scene, repo: Path, keys: Iterable[str] = PROGRAM_KEYS,
                  config: Path | None = None) -> None:
    """Point every key (in `config`, default the repository's own) at a marker command, turn on
    the attributes that select the filter/diff/merge drivers, and fill the hook directories."""
    target = ["-f", str(config)] if config else []
    for key in keys:
        value = scene.command(key)
        git(repo, "config", *target, key, f"!{value}" if key == "credential.helper" else value)
    git_dir = Path(git(repo, "rev-parse", "--absolute-git-dir").strip())
    write(git_dir, "info/attributes", "* filter=hostile diff=hostile merge=hostile\n")
    hooks_path = repo / ".hostile-hooks"
    git(repo, "config", *target, "core.hooksPath", str(hooks_path))
    for hooks in (git_dir / "hooks", hooks_path):
        for hook in HOOKS:
            write(hooks, hook, f"#!/bin/sh\n{scene.command('hook-' + hook)}\n").chmod(0o755)


def _set_ref(git_dir: Path, name: str, commit: str) -> None:
    write(git_dir, f"refs/heads/{name}", commit + "\n")


def write_index(repo: Path, paths: Iterable[str]) -> None:
    """Replace the index with one listing `paths` verbatim (git's own commands refuse '..' and
    absolute paths, a crafted index does not)."""
    write(repo, ".indexed-blob", "x\n")
    blob = git(repo, "hash-object", "-w", ".indexed-blob").strip()
    names = sorted(p.encode() for p in paths)
    body = b""
    for name in names:
        entry = struct.pack(">10I", 0, 0, 0, 0, 0, 0, 0o100644, 0, 0, 2) + bytes.fromhex(blob)
        entry += struct.pack(">H", len(name)) + name
        body += entry + b"\0" * (8 - len(entry) % 8)
    data = b"DIRC" + struct.pack(">II", 2, len(names)) + body
    (repo / ".git" / "index").write_bytes(data + hashlib.sha1(data).digest())


# -- builders: programs the repository names ---------------------------------------------------

def fsmonitor(scene: Scene, d: Path) -> Case:
    new_repo(d, {"a.txt": "plain\n"})
    git(d, "config", "core.fsmonitor", scene.command("core.fsmonitor"))
    return Case("fsmonitor", d, None, (scene.allowed,), False)


def fsmonitor_included(scene: Scene, d: Path) -> Case:
    new_repo(d, {"a.txt": "plain\n"})
    write(d, "evil.cfg", f"[core]\n\tfsmonitor = \"{scene.command('included-fsmonitor')}\"\n")
    git(d, "config", "include.path", "../evil.cfg")
    git(d, "config", "includeIf.gitdir:/.path", str(d / "evil.cfg"))
    return Case("fsmonitor_included", d, None, (scene.allowed,), False)


def every_program(scene: Scene, d: Path) -> Case:
    new_repo(d, {".gitattributes": "* filter=hostile diff=hostile merge=hostile\n", "a.txt": "plain\n"})
    name_programs(scene, d)
    return Case("every_program", d, None, (scene.allowed,), False)


def every_program_ref(scene: Scene, d: Path) -> Case:
    return Case("every_program_ref", every_program(scene, d).repository, "HEAD", (scene.allowed,), False)


def promisor_clone(scene: Scene, d: Path) -> None:
    """A partial clone of a repository outside: its blobs would be fetched when first read."""
    server = scene.outside / f"promisor-{d.name}"
    new_repo(server, {"big.txt": "fetched lazily\n"})
    git(server, "config", "uploadpack.allowFilter", "true")
    subprocess.run(["git", "clone", "-q", "--no-checkout", "--filter=blob:none", f"file://{server}", str(d)],
                   check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def promisor_uploadpack(scene: Scene, d: Path) -> Case:
    promisor_clone(scene, d)
    git(d, "config", "remote.origin.uploadpack", f"{scene.command('remote.origin.uploadpack')}; git-upload-pack")
    return Case("promisor_uploadpack", d, "origin/main", (scene.allowed,), None)


def promisor_ssh(scene: Scene, d: Path) -> Case:
    promisor_clone(scene, d)
    git(d, "config", "remote.origin.url", "ssh://git.example.invalid/repo.git")
    git(d, "config", "core.sshCommand", scene.command("core.sshCommand"))
    git(d, "config", "protocol.ssh.allow", "always")
    return Case("promisor_ssh", d, "origin/main", (scene.allowed,), None)


def promisor_ext(scene: Scene, d: Path) -> Case:
    promisor_clone(scene, d)
    marker = str(scene.markers / "ext-transport").replace(" ", "% ")
    git(d, "config", "remote.origin.url", f"ext::touch {marker}")
    git(d, "config", "protocol.ext.allow", "always")
    return Case("promisor_ext", d, "origin/main", (scene.allowed,), None)


def plain_directory(scene: Scene, d: Path) -> Case:
    """No repository of its own: in a scene made with `above_root`, git would use the one above."""
    write(d, "a.txt", "plain\n")
    return Case("plain_directory", d, None, (scene.allowed,), False)


def plain_directory_ref(scene: Scene, d: Path) -> Case:
    return Case("plain_directory_ref", plain_directory(scene, d).repository, "HEAD", (scene.allowed,), True)


# -- builders: repositories that reach outside the roots -----------------------------------------

def gitdir_file(scene: Scene, d: Path) -> Case:
    write(d, ".git", f"gitdir: {scene.outside / 'secret' / '.git'}\n")
    return Case("gitdir_file", d, "HEAD", (scene.allowed,), True)


def gitdir_file_worktree(scene: Scene, d: Path) -> Case:
    return Case("gitdir_file_worktree", gitdir_file(scene, d).repository, None, (scene.allowed,), True)


def gitdir_file_relative(scene: Scene, d: Path) -> Case:
    write(d, ".git", f"gitdir: {os.path.relpath(scene.outside / 'secret' / '.git', d)}\n")
    return Case("gitdir_file_relative", d, "HEAD", (scene.allowed,), True)


def dotgit_symlink(scene: Scene, d: Path) -> Case:
    d.mkdir(parents=True)
    os.symlink(scene.outside / "secret" / ".git", d / ".git")
    return Case("dotgit_symlink", d, "HEAD", (scene.allowed,), True)


def commondir(scene: Scene, d: Path) -> Case:
    write(d, ".git/HEAD", "ref: refs/heads/main\n")
    write(d, ".git/commondir", str(scene.outside / "secret" / ".git") + "\n")
    return Case("commondir", d, "HEAD", (scene.allowed,), True)


def objects_symlink(scene: Scene, d: Path) -> Case:
    new_repo(d, {"a.txt": "plain\n"})
    shutil.rmtree(d / ".git" / "objects")
    os.symlink(scene.outside / "secret" / ".git" / "objects", d / ".git" / "objects")
    _set_ref(d / ".git", "leak", scene.secret_commit)
    return Case("objects_symlink", d, "leak", (scene.allowed,), True)


def alternates(scene: Scene, d: Path) -> Case:
    new_repo(d, {"a.txt": "plain\n"})
    write(d, ".git/objects/info/alternates", f"{scene.outside / 'secret' / '.git' / 'objects'}\n")
    _set_ref(d / ".git", "leak", scene.secret_commit)
    return Case("alternates", d, "leak", (scene.allowed,), True)


def alternates_relative_quoted(scene: Scene, d: Path) -> Case:
    new_repo(d, {"a.txt": "plain\n"})
    rel = os.path.relpath(scene.outside / "loose" / ".git" / "objects", d / ".git" / "objects")
    write(d, ".git/objects/info/alternates", f"# a comment\n\n\"{rel}\"\n")
    _set_ref(d / ".git", "leak", scene.secret_commit)
    return Case("alternates_relative_quoted", d, "leak", (scene.allowed,), True)


def alternates_chained(scene: Scene, d: Path) -> Case:
    """An alternate inside the roots whose own alternates lead outside."""
    hop = d / "hop-objects"
    write(hop, "info/alternates", f"{scene.outside / 'secret' / '.git' / 'objects'}\n")
    new_repo(d / "repo", {"a.txt": "plain\n"})
    write(d / "repo", ".git/objects/info/alternates", f"{hop}\n")
    _set_ref(d / "repo" / ".git", "leak", scene.secret_commit)
    return Case("alternates_chained", d / "repo", "leak", (scene.allowed,), True)


def pack_symlinks(scene: Scene, d: Path) -> Case:
    new_repo(d, {"a.txt": "plain\n"})
    for pack in (scene.outside / "secret" / ".git" / "objects" / "pack").iterdir():
        os.symlink(pack, d / ".git" / "objects" / "pack" / pack.name)
    _set_ref(d / ".git", "leak", scene.secret_commit)
    return Case("pack_symlinks", d, "leak", (scene.allowed,), True)


def loose_object_symlinks(scene: Scene, d: Path) -> Case:
    new_repo(d, {"a.txt": "plain\n"})
    objects = scene.outside / "loose" / ".git" / "objects"
    for fanout in objects.iterdir():
        if len(fanout.name) == 2:
            (d / ".git" / "objects" / fanout.name).mkdir(exist_ok=True)
            for obj in fanout.iterdir():
                os.symlink(obj, d / ".git" / "objects" / fanout.name / obj.name)
    _set_ref(d / ".git", "leak", scene.secret_commit)
    return Case("loose_object_symlinks", d, "leak", (scene.allowed,), True)


def linked_worktree_outside(scene: Scene, d: Path) -> Case:
    git(scene.outside / "secret", "worktree", "add", "-q", "--detach", str(d))
    write(d, "s.txt", "the checked-out copy is harmless\n")
    return Case("linked_worktree_outside", d, "HEAD", (scene.allowed,), True)


def symlinked_directory_in_index(scene: Scene, d: Path) -> Case:
    new_repo(d, {"link/s.txt": "harmless\n", "a.txt": "plain\n"})
    shutil.rmtree(d / "link")
    os.symlink(scene.outside / "plain", d / "link")
    return Case("symlinked_directory_in_index", d, None, (scene.allowed,), False)


def escaping_paths_in_index(scene: Scene, d: Path) -> Case:
    new_repo(d, {"a.txt": "plain\n"})
    target = scene.outside / "plain" / "s.txt"
    write_index(d, [str(target), os.path.relpath(target, d), "a.txt", "a/../" + os.path.relpath(target, d)])
    return Case("escaping_paths_in_index", d, None, (scene.allowed,), False)


def submodule_outside(scene: Scene, d: Path) -> Case:
    new_repo(d, {"a.txt": "plain\n"})
    write(d, "sub/.git", f"gitdir: {scene.outside / 'secret' / '.git'}\n")
    return Case("submodule_outside", d, None, (scene.allowed,), False)


Builder = Callable[[Scene, Path], Case]
EXECUTION_VECTORS: tuple[Builder, ...] = (
    fsmonitor, fsmonitor_included, every_program, every_program_ref, promisor_uploadpack,
    promisor_ssh, promisor_ext, plain_directory, plain_directory_ref)
#: repositories git would read from outside the roots: refused
REFUSED_VECTORS: tuple[Builder, ...] = (
    gitdir_file, gitdir_file_worktree, gitdir_file_relative, dotgit_symlink, commondir,
    objects_symlink, alternates, alternates_relative_quoted, alternates_chained, pack_symlinks,
    loose_object_symlinks, linked_worktree_outside)
#: work trees listing paths that lead outside: indexed, without those paths
CONFINED_VECTORS: tuple[Builder, ...] = (symlinked_directory_in_index, escaping_paths_in_index, submodule_outside)
ESCAPE_VECTORS = REFUSED_VECTORS + CONFINED_VECTORS

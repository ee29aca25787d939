"""Shared helpers: real git repositories and trees made on disk, and a fresh engine."""

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpkit_codesearch import CodeSearch

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}, check=True)
    return proc.stdout


def git_init(repo: Path) -> Path:
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    return repo


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def write(root: Path, rel: str, data: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[CodeSearch]:
    eng = CodeSearch(tmp_path / "db" / "codesearch.sqlite3")
    yield eng
    eng.close()


def indexed_paths(eng: CodeSearch, project: str) -> set[str]:
    """Every path the engine has content for (via list_recent_files, the public view)."""
    return {f.path for f in eng.recent_files(500, project).files}

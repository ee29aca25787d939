"""Repositories written by an attacker, indexed with a real git: no program the repository
names may run, and nothing outside the allowed roots may be read or served (issue 22, items 1-2).

Every program a hostile repository names is `touch markers/<name>` (tests/hostile_git.py); a
marker file means git ran it.
"""

import os
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcpkit_codesearch import CodeSearch, SourceError
from mcpkit_codesearch.cli import index_command

from . import hostile_git as hg
from .conftest import indexed_paths

OUTSIDE = "outside the directories this server may index"


@pytest.fixture
def scene(tmp_path: Path) -> hg.Scene:
    return hg.make_scene(tmp_path / "scene")


def _index(engine: CodeSearch, case: hg.Case) -> object:
    return engine.index(str(case.repository), ref=case.ref, project=case.name, roots=case.roots)


def _secret_served(engine: CodeSearch) -> bool:
    found = engine.search(hg.SECRET)
    recent = engine.recent_files(500).files
    return found.total > 0 or any(hg.SECRET in (engine.read_file(f.project, f.path) or "") for f in recent)


@pytest.mark.parametrize("build", hg.EXECUTION_VECTORS, ids=lambda b: b.__name__)
def test_no_program_the_repository_names_runs(engine: CodeSearch, scene: hg.Scene, build: hg.Builder) -> None:
    case = build(scene, scene.allowed / "repo")
    try:
        _index(engine, case)
        refusal = None
    except SourceError as exc:
        refusal = str(exc)
    assert scene.executions() == []
    if case.refused is not None:
        assert (refusal is not None) == case.refused, refusal
    assert not _secret_served(engine)


def test_a_partial_clone_does_not_fetch_what_it_lacks(engine: CodeSearch, scene: hg.Scene) -> None:
    case = hg.promisor_uploadpack(scene, scene.allowed / "lazy")
    with pytest.raises(SourceError, match="git ls-tree failed") as err:
        _index(engine, case)
    assert "could not fetch" in str(err.value) and scene.executions() == []


def test_a_repository_above_the_root_is_not_used(engine: CodeSearch, tmp_path: Path) -> None:
    """git's discovery climbs from the indexed directory to a repository above the allowed root;
    codesearch does not look above the roots, so the directory is a plain one."""
    scene = hg.make_scene(tmp_path / "above", above_root=True)
    plain = hg.plain_directory(scene, scene.allowed / "plain")
    result = _index(engine, plain)
    assert result.files_added == 1 and indexed_paths(engine, plain.name) == {"a.txt"}
    for where in (plain.repository, scene.allowed):
        with pytest.raises(SourceError, match="is not inside a git work tree; a ref needs a git repository"):
            engine.index(str(where), ref="HEAD", project="above-ref", roots=plain.roots)
    assert _index(engine, hg.Case("root", scene.allowed, None, plain.roots, False)).files_added == 2
    assert scene.executions() == [] and not _secret_served(engine)


@pytest.mark.parametrize("build", hg.REFUSED_VECTORS, ids=lambda b: b.__name__)
def test_a_repository_reaching_outside_the_roots_is_refused(
        engine: CodeSearch, scene: hg.Scene, build: hg.Builder) -> None:
    case = build(scene, scene.allowed / "repo")
    assert case.refused
    with pytest.raises(SourceError, match=OUTSIDE) as err:
        _index(engine, case)
    message = str(err.value)
    assert message.startswith(f"{case.repository} is refused: its ") and str(scene.outside) in message
    assert str(scene.allowed) in message  # names the allowed roots
    assert not _secret_served(engine) and engine.projects() == []
    assert scene.executions() == []


@pytest.mark.parametrize(("build", "expected"), [
    pytest.param(hg.symlinked_directory_in_index, {"a.txt"}, id="symlinked_directory_in_index"),
    pytest.param(hg.escaping_paths_in_index, {"a.txt", ".indexed-blob"}, id="escaping_paths_in_index"),
    pytest.param(hg.submodule_outside, {"a.txt"}, id="submodule_outside"),
])
def test_paths_git_lists_are_read_only_below_the_root(
        engine: CodeSearch, scene: hg.Scene, build: hg.Builder, expected: set[str]) -> None:
    case = build(scene, scene.allowed / "repo")
    _index(engine, case)
    assert indexed_paths(engine, case.name) == expected
    assert not _secret_served(engine) and scene.executions() == []


@pytest.mark.parametrize("fifo", [".git/config", ".git/index", "sub/.gitignore"])
def test_a_fifo_where_git_reads_a_file_cannot_hang_a_run(
        engine: CodeSearch, scene: hg.Scene, monkeypatch: pytest.MonkeyPatch, fifo: str) -> None:
    repo = scene.allowed / "repo"
    hg.new_repo(repo, {"a.txt": "plain\n", "sub/b.txt": "plain\n"})
    (repo / fifo).unlink(missing_ok=True)
    os.mkfifo(repo / fifo)
    monkeypatch.setattr("mcpkit_codesearch.gitsafe.GIT_TIMEOUT_S", 2.0)
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"did not finish within 2 s .*FIFO"):
        engine.index(str(repo), project="fifo", roots=(scene.allowed,))
    assert time.monotonic() - started < 30


def test_repositories_that_stay_inside_the_roots_still_index(engine: CodeSearch, scene: hg.Scene) -> None:
    main = scene.allowed / "main"
    hg.new_repo(main, {"pkg/m.py": "INSIDE = 1\n"})
    hg.git(main, "worktree", "add", "-q", "-b", "feature", str(scene.allowed / "linked"))
    hg.git(scene.base, "clone", "-q", "--shared", str(main), str(scene.allowed / "shared"))
    separate = scene.allowed / "separate"
    hg.git(scene.base, "init", "-q", "--separate-git-dir", str(scene.allowed / "separate.git"), str(separate))
    hg.write(separate, "s.py", "INSIDE = 2\n")
    hg.git(separate, "add", "-A")
    hg.git(separate, "commit", "-q", "-m", "one")
    roots = (scene.allowed,)
    for name, path, ref in [("linked", scene.allowed / "linked", "HEAD"), ("linked-wt", scene.allowed / "linked", None),
                            ("shared", scene.allowed / "shared", "HEAD"), ("separate", separate, "HEAD"),
                            ("separate-wt", separate, None), ("sub", main / "pkg", "HEAD"), ("sub-wt", main / "pkg", None)]:
        result = engine.index(str(path), ref=ref, project=name, roots=roots)
        assert result.status == "completed" and result.files_added == 1, name
    assert engine.search("INSIDE").total == 7


def test_the_servers_environment_does_not_redirect_git(
        engine: CodeSearch, scene: hg.Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = scene.allowed / "repo"
    hg.new_repo(repo, {"a.txt": "own content\n"})
    monkeypatch.setenv("GIT_DIR", str(scene.outside / "secret" / ".git"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='{scene.command('env-fsmonitor')}'")
    for ref in ("HEAD", None):
        engine.index(str(repo), ref=ref, project=f"env-{ref}", roots=(scene.allowed,))
        assert indexed_paths(engine, f"env-{ref}") == {"a.txt"}
    assert not _secret_served(engine) and scene.executions() == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the repository to another user")
def test_another_users_repository_is_not_trusted(engine: CodeSearch, scene: hg.Scene) -> None:
    """git refuses a repository the server's user does not own (safe.directory); pinning GIT_DIR
    turns that check off in git, so codesearch makes it itself."""
    repo = scene.allowed / "theirs"
    case = hg.fsmonitor(scene, repo)
    hg.write(repo, ".gitignore", "ignored.txt\n")
    hg.write(repo, "ignored.txt", "listed only as a plain directory\n")
    subprocess.run(["chown", "-R", "nobody", str(repo)], check=True)
    _index(engine, case)  # a plain directory, as git would not read it
    assert indexed_paths(engine, case.name) == {"a.txt", ".gitignore", "ignored.txt"}
    with pytest.raises(SourceError, match="belongs to another user"):
        engine.index(str(repo), ref="HEAD", project="theirs-ref", roots=case.roots)
    assert scene.executions() == []


def test_the_operators_index_command_runs_no_repository_program(scene: hg.Scene, tmp_path: Path) -> None:
    case = hg.every_program(scene, scene.allowed / "repo")
    for ref in ([], ["--ref", "HEAD"]):
        done = CliRunner().invoke(index_command, [str(case.repository), *ref, "--database", str(tmp_path / "c.db")])
        assert done.exit_code == 0, done.output
    assert scene.executions() == []

"""Index runs on real directories and git repositories: what is indexed, what is skipped,
and the added/updated/removed/unchanged counts of incremental runs."""

import os
from pathlib import Path

import pytest

from mcpkit_codesearch import CodeSearch, SourceError

from .conftest import commit_all, git, git_init, indexed_paths, write


def test_plain_directory_skips_binaries_venvs_node_modules_and_git(
        engine: CodeSearch, tmp_path: Path) -> None:
    root = tmp_path / "plain"
    write(root, "src/app.py", "def main():\n    return 'plain tree'\n")
    write(root, "README.md", "# hello\n")
    write(root, "logo.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    write(root, "node_modules/lib/index.js", "module.exports = 'plain tree'\n")
    write(root, ".git/config", "[core]\n")  # a .git directory outside a real repo
    write(root, "env/pyvenv.cfg", "home = /usr/bin\n")
    write(root, "env/lib/site.py", "plain tree inside a venv\n")
    write(root, "latin1.txt", "caf\xe9 plain tree\n".encode("latin-1"))
    os.symlink(root / "README.md", root / "link.md")

    result = engine.index(str(root))
    assert result.status == "completed" and result.project == "plain"
    assert indexed_paths(engine, "plain") == {"src/app.py", "README.md", "latin1.txt"}
    assert result.files_added == 3 and result.files_skipped == 1  # the PNG
    hits = engine.search("plain tree").results
    assert [(h.path, h.line) for h in hits] == [("latin1.txt", 1), ("src/app.py", 2)]
    assert hits[0].snippet == "caf\ufffd plain tree"  # decoded with replacement


def test_git_work_tree_respects_gitignore_and_lists_untracked(
        engine: CodeSearch, tmp_path: Path) -> None:
    repo = git_init(tmp_path / "repo")
    write(repo, ".gitignore", "build/\n*.log\n.venv/\n")
    write(repo, "pkg/core.py", "TOKEN = 'tracked'\n")
    write(repo, "build/out.py", "TOKEN = 'ignored build'\n")
    write(repo, "debug.log", "TOKEN ignored log\n")
    write(repo, ".venv/pyvenv.cfg", "home = /usr\n")
    write(repo, ".venv/lib/x.py", "TOKEN venv\n")
    write(repo, "venv2/pyvenv.cfg", "home = /usr\n")  # not ignored, still a venv
    write(repo, "venv2/lib/y.py", "TOKEN venv2\n")
    write(repo, "node_modules/m.js", "TOKEN module\n")
    write(repo, "data.bin", b"TOKEN\0\1\2")
    write(repo, "legacy.c", b"/* caf\xe9 */ int TOKEN;\n")  # Latin-1, not UTF-8
    commit_all(repo, "first")
    write(repo, "notes.txt", "TOKEN untracked but not ignored\n")

    result = engine.index(str(repo), project="r")
    assert indexed_paths(engine, "r") == {".gitignore", "pkg/core.py", "notes.txt", "legacy.c"}
    assert result.files_skipped == 1  # data.bin
    hits = {h.path: h for h in engine.search("TOKEN", project="r").results}
    assert set(hits) == {"pkg/core.py", "notes.txt", "legacy.c"}
    assert hits["legacy.c"].snippet == "/* caf\ufffd */ int TOKEN;"
    assert hits["legacy.c"].column == 16


def test_incremental_counts_in_a_directory(engine: CodeSearch, tmp_path: Path) -> None:
    root = tmp_path / "inc"
    for i in range(6):
        write(root, f"f{i}.txt", f"file {i} version one\n")
    write(root, "blob.bin", b"\0\1\2")
    first = engine.index(str(root))
    assert (first.files_added, first.files_updated, first.files_removed,
            first.files_unchanged, first.files_skipped) == (6, 0, 0, 0, 1)

    write(root, "f0.txt", "file 0 version two, longer\n")        # size changes
    same_size = write(root, "f1.txt", "file 1 version ONE\n")      # same size, new mtime
    st = same_size.stat()
    os.utime(same_size, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    (root / "f2.txt").unlink()
    write(root, "new.txt", "a new file\n")
    second = engine.index(str(root))
    assert (second.files_added, second.files_updated, second.files_removed,
            second.files_unchanged, second.files_skipped) == (1, 2, 1, 3, 1)
    assert engine.search("version two").total == 1
    assert engine.search("version ONE", case_sensitive=True).results[0].path == "f1.txt"
    assert engine.search("file 2").total == 0
    assert "f2.txt" not in indexed_paths(engine, "inc")

    third = engine.index(str(root))
    assert (third.files_added, third.files_updated, third.files_removed,
            third.files_unchanged) == (0, 0, 0, 6)


def test_git_renames_and_deletions(engine: CodeSearch, tmp_path: Path) -> None:
    repo = git_init(tmp_path / "g")
    write(repo, "old_name.py", "def renamed_function():\n    pass\n")
    write(repo, "doomed.py", "DOOMED = True\n")
    write(repo, "keep.py", "KEEP = 1\n")
    commit_all(repo, "one")
    engine.index(str(repo))
    git(repo, "mv", "old_name.py", "new_name.py")
    git(repo, "rm", "-q", "doomed.py")
    commit_all(repo, "two")
    second = engine.index(str(repo))
    assert (second.files_added, second.files_removed, second.files_unchanged) == (1, 2, 1)
    assert [h.path for h in engine.search("renamed_function").results] == ["new_name.py"]
    assert engine.search("DOOMED").total == 0


def test_ref_indexing_reads_the_commit_without_checkout(engine: CodeSearch,
                                                        tmp_path: Path) -> None:
    repo = git_init(tmp_path / "refs")
    write(repo, "a.txt", "alpha version 1\n")
    write(repo, "b.txt", "bravo only in v1\n")
    write(repo, "img.dat", b"\0binary")
    v1 = commit_all(repo, "v1")
    git(repo, "tag", "v1")
    write(repo, "a.txt", "alpha version 2\n")
    (repo / "b.txt").unlink()
    write(repo, "c.txt", "charlie only in v2\n")
    commit_all(repo, "v2")
    write(repo, "a.txt", "alpha uncommitted edit\n")
    status_before = git(repo, "status", "--porcelain")

    result = engine.index(str(repo), ref="v1", project="old")
    assert result.files_added == 2 and result.files_skipped == 1
    assert git(repo, "status", "--porcelain") == status_before
    assert git(repo, "rev-parse", "HEAD").strip() != v1
    assert (repo / "a.txt").read_text() == "alpha uncommitted edit\n"
    assert engine.search("alpha", project="old").results[0].snippet == "alpha version 1"
    assert engine.search("bravo", project="old").total == 1
    assert engine.search("charlie", project="old").total == 0

    moved = engine.index(str(repo), ref="main", project="old")  # blob ids decide
    assert (moved.files_added, moved.files_updated, moved.files_removed,
            moved.files_unchanged, moved.files_skipped) == (1, 1, 1, 0, 1)
    assert engine.search("alpha", project="old").results[0].snippet == "alpha version 2"
    assert engine.read_file("old", "c.txt") == "charlie only in v2\n"
    again = engine.index(str(repo), ref=git(repo, "rev-parse", "HEAD").strip(), project="old")
    assert again.files_unchanged == 2 and again.files_added == again.files_updated == 0


def test_bad_requests_fail_clearly(engine: CodeSearch, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        engine.index(str(tmp_path / "missing"))
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(SourceError, match="not inside a git work tree"):
        engine.index(str(plain), ref="HEAD")
    repo = git_init(tmp_path / "r")
    write(repo, "x", "x\n")
    commit_all(repo, "x")
    with pytest.raises(SourceError, match="unknown git ref"):
        engine.index(str(repo), ref="no-such-branch")
    with pytest.raises(SourceError, match="invalid git ref"):
        engine.index(str(repo), ref="--output=/tmp/x")


def test_size_limit_setting(tmp_path: Path) -> None:
    root = tmp_path / "sizes"
    write(root, "small.txt", "needle small\n")
    write(root, "big.txt", "needle big\n" + "x" * 5000 + "\n")
    db = tmp_path / "s.sqlite3"
    strict = CodeSearch(db, max_file_size=1000)
    first = strict.index(str(root))
    assert (first.files_added, first.files_skipped) == (1, 1)
    assert strict.search("needle").total == 1
    assert strict.index(str(root)).files_skipped == 1  # unchanged and still too large
    strict.close()
    roomy = CodeSearch(db, max_file_size=10_000)
    second = roomy.index(str(root))
    assert (second.files_added, second.files_unchanged) == (1, 1)
    assert roomy.search("needle").total == 2
    roomy.close()


def test_background_run_and_status(engine: CodeSearch, tmp_path: Path) -> None:
    root = tmp_path / "bg"
    for i in range(40):
        write(root, f"d{i % 4}/f{i}.txt", f"background {i}\n")
    started = engine.start_index(str(root))
    assert started.status == "running" and started.run_id > 0
    done = engine.wait(started.run_id, timeout=30)
    assert done.status == "completed" and done.files_added == 40
    assert done.files_done == done.files_total == 40 and done.finished_at
    assert engine.search("background 39").total == 1
    ran = engine.index(str(root))
    assert engine.status(ran.run_id).files_unchanged == 40


def test_read_connections_do_not_pile_up_as_worker_threads_come_and_go(engine, tmp_path: Path) -> None:
    """mcpkit runs plain tools in worker threads that it retires when idle; a connection per
    thread leaked two fds for every thread ever used."""
    import os
    import threading

    write(tmp_path / "src", "a.py", "x = 1\n")
    engine.index(str(tmp_path / "src"))
    db = str(engine.database)

    def open_fds() -> int:
        return sum(1 for fd in os.listdir("/proc/self/fd")
                   if os.path.realpath(f"/proc/self/fd/{fd}").startswith(db))

    counts = []
    for _ in range(10):
        threads = [threading.Thread(target=engine.recent_files) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        counts.append(open_fds())
    # at most one connection per call running at once (4), each with its db and -wal/-shm files
    assert max(counts) <= 4 * 3, counts

"""Crash safety and concurrency with real processes: SIGKILL in the middle of a run, and
searches from this process while another process writes."""

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from mcpkit_codesearch import CodeSearch

from .conftest import write

# Runs an index in a child process and prints its progress, one line per callback.
CHILD = """
import sys
from mcpkit_codesearch import CodeSearch
eng = CodeSearch(sys.argv[1])
def show(run):
    print(run.phase, run.done, run.total, flush=True)
result = eng.index(sys.argv[2], project="big", progress=show)
print("result", result.status, flush=True)
"""

FILLER = "".join(f"    value_{i} = compute({i}, 'filler text for the trigram index')\n"
                 for i in range(120))


def _grow(root: Path, count: int, tag: str) -> None:
    for i in range(count):
        write(root, f"gen/{i % 30:02d}/file_{i:05d}.py",
              f"# {tag} file {i}\ndef f_{i}():\n{FILLER}")


def _child(db: Path, root: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(root)],
                            stdout=subprocess.PIPE, text=True)


def test_sigkill_mid_run_keeps_previous_state_and_next_run_completes(tmp_path: Path) -> None:
    root, db = tmp_path / "big", tmp_path / "db.sqlite3"
    write(root, "marker.txt", "state marker_old\n")
    _grow(root, 200, "first")
    eng = CodeSearch(db)
    first = eng.index(str(root), project="big")
    assert first.files_added == 201

    write(root, "marker.txt", "state marker_new\n")
    _grow(root, 3000, "second")  # rewrites the 200 and adds 2800
    child = _child(db, root)
    assert child.stdout is not None
    killed_at = None
    for line in child.stdout:
        phase, done, _total = line.split()[:3]
        if phase == "indexing" and int(done) >= 500:  # a batch of the new state is committed
            child.send_signal(signal.SIGKILL)
            killed_at = int(done)
            break
    child.wait(timeout=30)
    assert killed_at is not None and child.returncode == -signal.SIGKILL

    # the last complete state is what searches see
    assert eng.search("marker_old").total == 1
    assert eng.search("marker_new").total == 0
    assert eng.search("second file").total == 0
    assert eng.search("first file").total == 200
    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        raw.execute("INSERT INTO content(content) VALUES('integrity-check')")
        assert raw.execute("SELECT status FROM runs WHERE id=2").fetchone()[0] == "running"
        staged = raw.execute("SELECT count(*) FROM files WHERE live=0").fetchone()[0]
    assert staged >= 500  # the killed run had written (invisible) rows

    # the next run completes, cleans up, and records the killed one as interrupted
    again = eng.index(str(root), project="big")
    assert again.status == "completed"
    assert (again.files_added, again.files_updated, again.files_unchanged) == (2800, 201, 0)
    assert eng.status(2).status == "interrupted"
    assert eng.search("marker_new").total == 1 and eng.search("marker_old").total == 0
    assert eng.search("second file", limit=1).total == 3000
    with sqlite3.connect(db) as raw:
        assert raw.execute("SELECT count(*) FROM files WHERE live=0").fetchone()[0] == 0
        assert raw.execute("SELECT count(*) FROM content").fetchone()[0] == 3001
    eng.close()


def test_searches_see_whole_states_while_another_process_indexes(tmp_path: Path) -> None:
    root, db = tmp_path / "busy", tmp_path / "db.sqlite3"
    write(root, "seed.txt", "seed\n")
    eng = CodeSearch(db)
    eng.index(str(root), project="big")
    _grow(root, 2500, "fresh")
    child = _child(db, root)
    assert child.stdout is not None
    assert child.stdout.readline().startswith("listing")
    seen: set[int] = set()
    searches = 0
    while child.poll() is None:
        t0 = time.perf_counter()
        total = eng.search("fresh file", limit=1).total
        assert time.perf_counter() - t0 < 2.0  # never waits for the writer
        seen.add(total)
        searches += 1
        assert eng.search("seed").total == 1
    out = child.stdout.read()
    assert "result completed" in out
    assert seen <= {0, 2500} and searches >= 3  # never a half-written state
    assert eng.search("fresh file", limit=1).total == 2500
    eng.close()

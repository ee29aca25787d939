"""A short run of the hostile-repository leg of the fuzz campaign (fuzz/hostile_repos.py): every
known vector once, then random mixtures, through a real `mcpkit serve --plugin codesearch`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugins" / "codesearch" / "tests"))
import hostile_git  # noqa: E402


def test_hostile_repositories_run_nothing_and_leak_nothing(tmp_path: Path) -> None:
    out = tmp_path / "repos.json"
    proc = subprocess.run([sys.executable, str(ROOT / "fuzz" / "hostile_repos.py"), "--seconds", "4", "--seed", "5", "--min-mixtures", "4",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    tally = json.loads(out.read_text())
    known = {b.__name__ for b in hostile_git.EXECUTION_VECTORS + hostile_git.ESCAPE_VECTORS}
    assert known <= set(tally["vectors"]), proc.stdout
    assert tally["cases"] > len(known) and tally["refused"] >= len(hostile_git.REFUSED_VECTORS)
    assert (tally["executions"], tally["leaks"], tally["misses"], tally["hangs"], tally["crashes"]) == (0, 0, 0, 0, 0)
    assert tally["internal"] == 0 and tally["tracebacks"] == 0, proc.stdout

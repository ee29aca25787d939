"""A short run of the fuzz campaign (fuzz/campaign.py; `make fuzz` runs the long one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_short_campaign_finds_no_crash_hang_or_5xx(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, str(ROOT / "fuzz" / "campaign.py"), "--seconds", "8", "--seed", "7",
                           "--out", str(out)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    tallies = json.loads(out.read_text())
    assert [t["transport"] for t in tallies] == ["stdio", "http", "auth", "redis", "openapi-specs"]
    assert tallies[2]["bypasses"] == 0 and tallies[2]["false_refusals"] == 0 and tallies[2]["leaks"] == 0, proc.stdout
    assert all(t["sent"] > 100 for t in tallies[:4]), proc.stdout
    assert tallies[4]["sent"] >= 3 and tallies[4]["unbounded"] == tallies[4]["lost"] == 0, proc.stdout
    assert sum(t["tracebacks"] for t in tallies) == 0, proc.stdout
    assert set(tallies[3]["faults"]) == {"oom", "readonly", "misconf", "stopped", "restart"}, proc.stdout

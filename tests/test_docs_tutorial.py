"""The plugin tutorial in docs/writing-plugins.md is run as written: its files are taken from the
page's code blocks (those starting with a `# path` comment) and its tests must pass."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from .helpers import ROOT

BLOCK = re.compile(r"```(?:python|toml)\n# (?P<path>[\w./-]+)\n(?P<body>.*?)```", re.S)


def test_the_tutorial_runs(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "writing-plugins.md").read_text()
    files = {m["path"]: m["body"] for m in BLOCK.finditer(page)}
    assert {"pyproject.toml", "notes_plugin/plugin.py", "tests/conftest.py", "tests/test_notes.py"} <= set(files)
    for rel, body in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    (tmp_path / "notes_plugin" / "__init__.py").write_text("")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "5 passed" in proc.stdout, proc.stdout + proc.stderr

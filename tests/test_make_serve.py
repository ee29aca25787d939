"""`make serve` as a host would run it: nothing but protocol on stdout, even on the run that
installs (make's recipe echo and pip's output go to stderr), and a one-line banner on stderr."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from .helpers import ROOT

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}}


def serve(*make_args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no fixture plugins: what a host gets
    proc = subprocess.run(["make", *make_args], input=json.dumps(INIT) + "\n", capture_output=True, text=True,
                          timeout=600, cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["result"]["serverInfo"]["name"] == "mcpkit", proc.stdout
    return proc


def test_make_serve_writes_only_protocol_to_stdout(tmp_path: Path) -> None:
    # A stamp that does not exist yet makes this run go through the install recipe (pip against
    # the existing venv), as a first run does.
    proc = serve("serve", f"STAMP={tmp_path / 'stamp'}", cwd=ROOT)
    assert (tmp_path / "stamp").exists()
    assert "installing mcpkit and the bundled plugins" in proc.stderr
    banner = [line for line in proc.stderr.splitlines() if line.startswith("mcpkit: serving ")]
    assert len(banner) == 1 and banner[0].endswith(" on stdio") and "codesearch" in banner[0]
    assert "hello" not in banner[0]  # the example plugin is a test fixture, never served by make serve
    assert "project.license" not in proc.stderr


def test_make_serve_from_another_directory() -> None:
    """make announces `-C` on stdout before it reads the Makefile; -s (as the docs say) stops it."""
    serve("-s", "-C", str(ROOT), "serve", cwd=Path("/"))

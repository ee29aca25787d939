"""`make dist`: wheels of mcpkit and every bundled plugin that work outside this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .helpers import ROOT


def test_make_dist_wheels_install_and_serve(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    made = subprocess.run(["make", "-s", "dist", f"DIST={dist}"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr
    wheels = sorted(p.name.split("-")[0] for p in dist.glob("*.whl"))
    plugins = sorted(p.parent.name for p in (ROOT / "plugins").glob("*/pyproject.toml"))
    assert wheels == sorted(["mcpkit", *(f"mcpkit_{name.replace('-', '_')}" for name in plugins)])

    # Installed from the wheels alone (no source tree), ahead of this checkout's editable installs.
    site = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-qq", "--no-deps", "--target", str(site),
                          *map(str, dist.glob("*.whl"))], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    env = {**os.environ, "PYTHONPATH": str(site)}
    code = ("import mcpkit, mcpkit.testing, mcpkit.scaffold, mcpkit_openapi, sys; "
            "print(mcpkit.__file__); print(mcpkit_openapi.__file__)")
    where = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                           cwd=tmp_path)  # not the checkout: its folder would come first on sys.path
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(site)) for line in where.stdout.splitlines())
    listed = subprocess.run([sys.executable, "-m", "mcpkit.cli", "plugins", "--strict"], capture_output=True,
                            text=True, env=env, timeout=60, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    for name in ("codesearch", "openapi", "invocation_log"):
        assert f"{name}  (mcpkit-{name.replace('_', '-')} 0.1.0)" in listed.stdout

"""`make dist`: wheels of mcpkit and every bundled plugin that work outside this checkout.

The check lists the project's own plugins (`mcpkit plugins --strict --plugin ...`), never
everything installed: a plugin author's half-written plugin in the same environment (the docs tell
them to `pip install -e .` it there) must not fail this project's suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import ROOT
from .project_venv import plugin_names
from .test_plugins import make_dist


def list_strict(site: Path, *extra_paths: Path) -> subprocess.CompletedProcess[str]:
    """`mcpkit plugins --strict` over the bundled plugins, with ``site`` (and ``extra_paths``) first."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (site, *extra_paths))}
    selection = [arg for name in plugin_names("plugins") for arg in ("--plugin", name)]
    return subprocess.run([sys.executable, "-m", "mcpkit.cli", "plugins", "--strict", *selection],
                          capture_output=True, text=True, env=env, timeout=60,
                          cwd=site.parent)  # not the checkout: its folder would come first on sys.path


@pytest.fixture(scope="module")
def wheel_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mcpkit and the bundled plugins installed from `make dist`'s wheels alone (no source tree)."""
    tmp = tmp_path_factory.mktemp("dist")
    dist = tmp / "dist"
    made = subprocess.run(["make", "-s", "dist", f"DIST={dist}"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr
    wheels = sorted(p.name.split("-")[0] for p in dist.glob("*.whl"))
    plugins = sorted(p.parent.name for p in (ROOT / "plugins").glob("*/pyproject.toml"))
    assert wheels == sorted(["mcpkit", *(f"mcpkit_{name.replace('-', '_')}" for name in plugins)])
    site = tmp / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-qq", "--no-deps", "--target", str(site),
                          *map(str, dist.glob("*.whl"))], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    return site


def test_make_dist_wheels_install_and_serve(wheel_site: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(wheel_site)}
    code = ("import mcpkit, mcpkit.testing, mcpkit.scaffold, mcpkit_openapi, sys; "
            "print(mcpkit.__file__); print(mcpkit_openapi.__file__)")
    where = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                           cwd=wheel_site.parent)  # not the checkout: its folder would come first on sys.path
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(wheel_site)) for line in where.stdout.splitlines())
    listed = list_strict(wheel_site)
    assert listed.returncode == 0, listed.stderr
    for name in ("codesearch", "openapi", "invocation_log"):
        assert f"{name}  (mcpkit-{name.replace('_', '-')} 0.1.0)" in listed.stdout


def test_a_foreign_plugin_in_the_environment_does_not_fail_the_check(wheel_site: Path, tmp_path: Path) -> None:
    """A broken plugin and one whose tool clashes with a bundled one, installed beside the
    project (a scratch folder on the path, as the .venv's site-packages would be)."""
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    make_dist(foreign, "acme-wip", "wip", "acme_wip", "raise ImportError('half-written')\n")
    make_dist(foreign, "acme-search", "acme_search", "acme_search", """
        import mcpkit

        @mcpkit.tool
        async def search_code(query: str) -> str:
            return query

        @mcpkit.hookimpl
        def mcpkit_tools(config):
            return [search_code]
    """)
    everything = subprocess.run([sys.executable, "-m", "mcpkit.cli", "plugins", "--strict"], capture_output=True,
                                text=True, timeout=60, cwd=tmp_path,
                                env={**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (wheel_site, foreign)))})
    assert everything.returncode == 1 and "half-written" in everything.stdout  # they really are seen
    assert "search_code [CONFLICT]" in everything.stdout
    checked = list_strict(wheel_site, foreign)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "wip" not in checked.stdout and "acme" not in checked.stdout

    # ... and the check still covers every bundled plugin: one that fails to load fails it.
    broken = tmp_path / "broken-site"
    shutil.copytree(wheel_site, broken)
    init = broken / "mcpkit_openapi" / "__init__.py"
    init.write_text("raise ImportError('openapi is broken')\n" + init.read_text())
    failed = list_strict(broken)
    assert failed.returncode == 1 and "openapi is broken" in failed.stdout, failed.stdout + failed.stderr

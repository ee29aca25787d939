"""A virtual environment that holds what the test venv holds except plugins from outside this
project: the suite tests the project, not a half-written plugin its author installed beside it
(the docs tell plugin authors to `pip install -e .` into the environment mcpkit runs from).

It costs no install: its site-packages is a folder of symlinks to the test venv's entries, minus
the metadata of foreign plugin distributions, so entry-point discovery never finds them, and
minus the distributions asked to be left out (a venv without an extra's packages)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Iterable

from .helpers import ROOT

GROUP = "mcpkit.plugins"


def plugin_names(*folders: str) -> list[str]:
    """Entry-point names of the plugins whose distributions are in ``folders`` of the checkout
    (``plugins``: the bundled ones; ``examples``: the test fixtures), sorted."""
    names: set[str] = set()
    for folder in folders:
        for pyproject in ROOT.glob(f"{folder}/*/pyproject.toml"):
            project = tomllib.loads(pyproject.read_text()).get("project", {})
            names.update(project.get("entry-points", {}).get(GROUP, {}))
    return sorted(names)


def foreign_metadata(site: Path) -> set[str]:
    """Names of the metadata folders in ``site`` of distributions offering a plugin that is not the project's."""
    project = set(plugin_names("plugins", "examples"))
    out = set()
    for dist in metadata.distributions(path=[str(site)]):
        if any(ep.name not in project for ep in dist.entry_points.select(group=GROUP)):
            out.add(Path(str(dist._path)).name)  # type: ignore[attr-defined]
    return out


def entries_of(site: Path, names: Iterable[str]) -> set[str]:
    """The top-level entries in ``site`` (packages, modules, metadata folders) of the
    distributions ``names``; a name not installed there has none (a fresh machine never
    installs packages the project stopped depending on, an old venv may still hold them)."""
    out = set()
    for name in names:
        for dist in metadata.distributions(name=name, path=[str(site)]):
            out.update(f.parts[0] for f in dist.files or () if f.parts[0] not in ("..", "__pycache__"))
    return out


def project_venv(dest: Path, site: Path | None = None, without: Iterable[str] = ()) -> Path:
    """Create at ``dest`` a venv over ``site`` (default: the running venv's site-packages)
    without its foreign plugins nor the distributions named in ``without``; with an ``mcpkit``
    command. Returns ``dest``."""
    site = site or Path(sysconfig.get_paths()["purelib"])
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True, timeout=60)
    own = dest / Path(sysconfig.get_paths()["purelib"]).relative_to(sys.prefix)
    hidden = foreign_metadata(site) | entries_of(site, without)
    for entry in site.iterdir():
        if entry.name not in hidden and not (own / entry.name).exists():
            (own / entry.name).symlink_to(entry)
    script = dest / "bin" / "mcpkit"
    script.write_text(f"#!{dest / 'bin' / 'python'}\nimport sys\nfrom mcpkit.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return dest

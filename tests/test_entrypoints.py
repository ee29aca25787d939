"""The lean entry-point reader must find exactly what importlib.metadata finds."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

from mcpkit.plugins.entrypoints import _normalize, entry_points


def _importlib_view(group: str, path: list[str] | None = None) -> list[tuple[str, str, str, str]]:
    """What importlib.metadata reports: first distribution of each name wins."""
    seen: set[str] = set()
    out = []
    for dist in metadata.distributions(**({} if path is None else {"path": path})):
        key = _normalize(dist._normalized_name if hasattr(dist, "_normalized_name") else dist.metadata["Name"])  # type: ignore[attr-defined]
        if key in seen:
            continue
        seen.add(key)
        out += [(ep.name, ep.value, dist.metadata["Name"], dist.version) for ep in dist.entry_points if ep.group == group]
    return sorted(out)


def _ours(group: str, path: list[str] | None = None) -> list[tuple[str, str, str | None, str | None]]:
    return sorted((ep.name, ep.value, ep.dist_name, ep.dist_version) for ep in entry_points(group, path))


@pytest.mark.parametrize("group", ["mcpkit.plugins", "console_scripts", "pytest11"])
def test_same_as_importlib_metadata_on_this_environment(group: str) -> None:
    ours = _ours(group)
    assert ours == _importlib_view(group)
    if group == "mcpkit.plugins":
        assert {"hello", "codesearch", "openapi"} <= {name for name, *_ in ours}


def _dist(root: Path, folder: str, meta_file: str, name: str, version: str, eps: str | None) -> None:
    d = root / folder
    d.mkdir(parents=True)
    (d / meta_file).write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nName: not-a-header\n")
    if eps is not None:
        (d / "entry_points.txt").write_text(eps)


def test_same_as_importlib_metadata_on_crafted_paths(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _dist(a, "acme_tools-1.0.dist-info", "METADATA", "acme-tools", "1.0",
          "# comment\n[mcpkit.plugins]\nacme = acme_tools\n\n# another comment\nacme2 = acme_tools.sub:plugin [extra]\n[other]\nx = y\n")
    _dist(a, "nothing-0.1.dist-info", "METADATA", "nothing", "0.1", None)
    _dist(a, "legacy.egg-info", "PKG-INFO", "legacy", "3.2", "[mcpkit.plugins]\nold = legacy_mod:thing\n")
    # the same distribution again, later on the path: shadowed by the first
    _dist(b, "Acme.Tools-2.0.dist-info", "METADATA", "Acme.Tools", "2.0", "[mcpkit.plugins]\nshadowed = nope\n")
    _dist(b, "beta-0.2.dist-info", "METADATA", "beta", "0.2", "[mcpkit.plugins]\nbeta = beta_mod\n")
    path = [str(a), str(b), str(tmp_path / "missing")]
    ours = _ours("mcpkit.plugins", path)
    assert ours == _importlib_view("mcpkit.plugins", path)
    assert ("acme2", "acme_tools.sub:plugin [extra]", "acme-tools", "1.0") in ours
    assert ("old", "legacy_mod:thing", "legacy", "3.2") in ours
    assert "shadowed" not in {name for name, *_ in ours}


def test_load_resolves_module_and_attributes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ep_target.py").write_text("class Box:\n    class Inner:\n        value = 42\n")
    _dist(tmp_path, "ep_target-1.0.dist-info", "METADATA", "ep-target", "1.0",
          "[g]\nmod = ep_target\nattr = ep_target:Box.Inner [x]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = {ep.name: ep for ep in entry_points("g", [str(tmp_path)])}
    assert found["mod"].load() is sys.modules["ep_target"]
    assert found["attr"].load().value == 42

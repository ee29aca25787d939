"""The public API is `mcpkit.__all__`: complete, documented, and the only thing bundled plugins use.

Modelled on trio's test_exports.py: what a plugin author can reach from `import mcpkit` is
exactly what the package says it exports, each export says what it is, and the bundled plugins
(which the docs hold up as examples) reach nothing else.
"""

from __future__ import annotations

import ast
import re
import types
from pathlib import Path

import mcpkit

ROOT = Path(__file__).resolve().parent.parent


def test_every_export_exists_once() -> None:
    assert len(mcpkit.__all__) == len(set(mcpkit.__all__))
    missing = [name for name in mcpkit.__all__ if not hasattr(mcpkit, name)]
    assert missing == []


def test_nothing_public_is_left_out_of_all() -> None:
    """A public name in the namespace that is not in __all__ is an accident (a leaked import)."""
    leaked = [name for name, value in vars(mcpkit).items()
              if not name.startswith("_") and name not in mcpkit.__all__ and not isinstance(value, types.ModuleType)]
    assert leaked == []


def test_every_export_says_what_it_is() -> None:
    undocumented = [name for name in mcpkit.__all__ if name != "__version__"
                    and not (getattr(getattr(mcpkit, name), "__doc__", None) or "").strip()]
    assert undocumented == []


def test_the_docs_list_every_export() -> None:
    text = (ROOT / "docs" / "writing-plugins.md").read_text()
    table = text[text.index("## The public API"):]
    listed = set(re.findall(r"`([A-Za-z_]+)`", table))
    assert sorted(set(mcpkit.__all__) - listed) == []
    assert sorted(n for n in listed - set(mcpkit.__all__) if n[0].isupper() or n in ("tool", "resource")) == []


def _mcpkit_uses(path: Path) -> set[str]:
    """The names a module takes from mcpkit: ``mcpkit.X`` attributes and ``from mcpkit import X``."""
    tree = ast.parse(path.read_text(), str(path))
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "mcpkit":
            used.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module == "mcpkit":
            used.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mcpkit."):
            used.add(node.module)  # an internal module: never allowed
    return used


def test_bundled_plugins_use_only_the_public_api() -> None:
    sources = sorted(ROOT.glob("plugins/*/src/**/*.py")) + sorted(ROOT.glob("examples/*/*/*.py"))
    assert len(sources) > 10
    outside = {str(p.relative_to(ROOT)): sorted(_mcpkit_uses(p) - set(mcpkit.__all__)) for p in sources}
    assert {k: v for k, v in outside.items() if v} == {}


def test_the_check_above_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import mcpkit\nfrom mcpkit.server.app import App\nmcpkit.registry\n")
    assert _mcpkit_uses(bad) - set(mcpkit.__all__) == {"mcpkit.server.app", "registry"}

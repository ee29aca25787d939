"""Plugins from a path: a module file (``./weather.py``) or a package folder (``./weather/``),
served without being installed, under the name of the file or folder.

The module is imported under a private name (``_mcpkit_path_plugins.weather``), so a file named
like a standard module (``http.py``) shadows nothing, and a package's relative imports work.
The folder holding it is appended to ``sys.path`` (as running a script would, but last), so a
one-file plugin can import the modules next to it.

Every import compiles from the source and writes no bytecode: an edit saved within the same
second as the previous one, at the same size, would otherwise load the old code from
``__pycache__`` (its check is mtime in seconds and size). A fresh import replaces the module
in ``sys.modules`` only when it succeeds; a failed one leaves the previous version in place.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

#: the package every path plugin's module is imported under
PACKAGE = "_mcpkit_path_plugins"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class PluginPath:
    """A plugin given by path: ``name`` is the file's stem or the folder's name."""

    name: str
    path: Path  # absolute: the .py file, or the package folder
    is_package: bool

    @property
    def module_name(self) -> str:
        return f"{PACKAGE}.{self.name.replace('-', '_')}"

    @property
    def root(self) -> Path:
        """What to watch: the package folder, or the file."""
        return self.path

    def load(self) -> types.ModuleType:
        """Import the module afresh (its submodules too, for a package)."""
        return _import_fresh(self)


def plugin_path(given: str | os.PathLike[str]) -> PluginPath:
    """The plugin a path names; ValueError saying what is wrong with the path."""
    raw = Path(given).expanduser()
    path = raw.resolve()
    if path.is_file() and path.name == "__init__.py":
        path = path.parent
    if path.is_dir():
        if not (path / "__init__.py").is_file():
            raise ValueError(f"plugin path {given}: a folder must be a Python package (it has no __init__.py)")
        name, is_package = path.name, True
    elif path.is_file():
        if path.suffix != ".py":
            raise ValueError(f"plugin path {given}: not a Python file (.py) or a package folder")
        name, is_package = path.stem, False
    else:
        raise ValueError(f"plugin path {given}: no such file or folder")
    if not _NAME.fullmatch(name):
        raise ValueError(f"plugin path {given}: {name!r} cannot be a plugin name; rename it with letters, digits, "
                         f"_ and - (e.g. weather.py)")
    return PluginPath(name, path, is_package)


def plugin_paths(given: Iterable[str | os.PathLike[str]]) -> list[PluginPath]:
    """Each path's plugin, once per path; two paths with one name are an error."""
    out: dict[str, PluginPath] = {}
    for item in given:
        pp = plugin_path(item)
        other = out.get(pp.name)
        if other is not None and other.path != pp.path:
            raise ValueError(f"two plugin paths are both named {pp.name!r}: {other.path} and {pp.path}; "
                             f"rename one of them")
        out[pp.name] = pp
    return list(out.values())


def setting_paths(value: Any, base: Path | None, where: str) -> list[str]:
    """``plugin_paths`` of a config file: a list of strings, relative to the file's folder."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{where} plugin_paths must be a list of paths, got {value!r}")
    return [str((base / v) if base is not None and not Path(v).expanduser().is_absolute() else Path(v).expanduser())
            for v in value]


def _package() -> types.ModuleType:
    pkg = sys.modules.get(PACKAGE)
    if pkg is None:
        pkg = types.ModuleType(PACKAGE, "Plugins mcpkit loaded from a path (see mcpkit.plugins.paths).")
        pkg.__path__ = []  # a namespace: each plugin's module is placed in it by hand
        sys.modules[PACKAGE] = pkg
    if not any(isinstance(f, _SourceOnlyFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceOnlyFinder())
    return pkg


def _import_fresh(pp: PluginPath) -> types.ModuleType:
    pkg = _package()
    folder = str(pp.path.parent)
    if folder not in sys.path:
        sys.path.append(folder)  # the modules next to it import as they would from a script
    name = pp.module_name
    old = {k: m for k, m in sys.modules.items() if k == name or k.startswith(name + ".")}
    for key in old:
        del sys.modules[key]
    origin = pp.path / "__init__.py" if pp.is_package else pp.path
    spec = importlib.util.spec_from_file_location(
        name, origin, loader=_SourceOnlyLoader(name, str(origin)),
        submodule_search_locations=[str(pp.path)] if pp.is_package else None)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]
        sys.modules.update(old)
        raise
    setattr(pkg, name.rpartition(".")[2], module)
    return module


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compile from the source every time; never read or write ``__pycache__``."""

    def path_stats(self, path: str) -> Any:
        raise OSError("path plugins are always compiled from their source")


class _SourceOnlyFinder(importlib.abc.MetaPathFinder):
    """The submodules of a path plugin's package load through :class:`_SourceOnlyLoader` too."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> Any:
        if not fullname.startswith(PACKAGE + ".") or fullname.count(".") < 2 or not path:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and isinstance(spec.loader, importlib.machinery.SourceFileLoader) and spec.origin:
            spec.loader = _SourceOnlyLoader(fullname, spec.origin)
        return spec


__all__ = ["PluginPath", "plugin_path", "plugin_paths", "setting_paths", "PACKAGE"]

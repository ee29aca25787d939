"""Entry points of one group, read straight from the installed distributions' metadata.

``importlib.metadata`` costs about 40 ms to import (email, zipfile, csv and friends), a fifth
of ``mcpkit serve``'s start-up; this reads the same files with ``os`` alone. It follows the rules
``importlib.metadata.entry_points()`` follows: distributions are the ``*.dist-info`` and
``*.egg-info`` folders found on ``sys.path``, in path order; when two carry the same
(normalized) name only the first counts. A ``sys.path`` entry that is a zip archive is beyond
this reader: then it hands the whole job to ``importlib.metadata``.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Iterable

_SUFFIXES = (".dist-info", ".egg-info")


@dataclass(frozen=True)
class EntryPoint:
    name: str
    value: str
    group: str
    dist_name: str | None
    dist_version: str | None

    def load(self) -> Any:
        """Import the object ``module[:attr.attr]`` names (extras in brackets are ignored)."""
        spec = self.value.split("[", 1)[0].strip()
        module, _, attrs = spec.partition(":")
        obj: Any = importlib.import_module(module.strip())
        for attr in filter(None, attrs.strip().split(".")):
            obj = getattr(obj, attr)
        return obj


def entry_points(group: str, path: Iterable[str] | None = None) -> list[EntryPoint]:
    """Every entry point of ``group``, in distribution order then file order."""
    entries = list(sys.path if path is None else path)
    if any(os.path.isfile(entry or ".") for entry in entries):
        return _from_importlib(group, entries)
    seen: set[str] = set()
    out: list[EntryPoint] = []
    for entry in entries:
        root = entry or "."
        try:
            children = sorted(os.listdir(root)) if os.path.isdir(root) else []
        except OSError:
            continue
        for child in children:
            if not child.lower().endswith(_SUFFIXES):
                continue
            folder = os.path.join(root, child)
            key = _normalize(_name_from_stem(child.rsplit(".", 1)[0]))
            if key in seen or not os.path.isdir(folder):
                continue
            seen.add(key)
            text = _read(os.path.join(folder, "entry_points.txt"))
            if text is None:
                continue
            found = [(name, value) for g, name, value in _parse(text) if g == group]
            if found:
                dist_name, dist_version = _dist_identity(folder)
                out.extend(EntryPoint(name, value, group, dist_name, dist_version) for name, value in found)
    return out


def _name_from_stem(stem: str) -> str:
    """``foo_bar-1.0`` -> ``foo_bar``: the name part of a metadata folder's stem."""
    return stem.split("-", 1)[0]


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return None


def _parse(text: str) -> Iterable[tuple[str, str, str]]:
    """``entry_points.txt`` (INI): yield (group, name, value)."""
    group = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line[1:-1].strip()
            continue
        name, sep, value = line.partition("=")
        if group is not None and sep:
            yield group, name.strip(), value.strip()


def _dist_identity(folder: str) -> tuple[str | None, str | None]:
    """Name and Version from the METADATA (or PKG-INFO) headers."""
    text = _read(os.path.join(folder, "METADATA")) or _read(os.path.join(folder, "PKG-INFO")) or ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line
        key, sep, value = line.partition(":")
        if sep and key in ("Name", "Version"):
            fields.setdefault(key, value.strip())
    return fields.get("Name"), fields.get("Version")


def _from_importlib(group: str, path: list[str]) -> list[EntryPoint]:
    from importlib import metadata

    out: list[EntryPoint] = []
    seen: set[str] = set()
    for dist in metadata.distributions(path=path):
        key = _normalize(dist.metadata["Name"] or "")
        if key in seen:
            continue
        seen.add(key)
        for ep in dist.entry_points:
            if ep.group == group:
                out.append(EntryPoint(ep.name, ep.value, group, dist.metadata["Name"], dist.version))
    return out

"""What ``mcpkit plugins`` shows: every plugin, what it offers, and what went wrong."""

from __future__ import annotations

from typing import Any

from ..server.app import App
from ..server.registry import KIND_GROUPS
from .naming import resolution_hint


def plugin_rows(app: App) -> list[dict[str, Any]]:
    """One row per plugin; a name two plugins offer is listed, and marked, on both."""
    rows: list[dict[str, Any]] = []
    by_name: dict[str, dict[str, Any]] = {}
    for info in app.plugins:
        row = {"name": info.name, "distribution": info.distribution, "version": info.version,
               "loaded": info.loaded, "error": info.error, "warnings": list(info.warnings),
               **app.registry.items_of(info.name), "conflicts": []}
        if info.status is not None:
            row["upstream"] = info.status()
        rows.append(row)
        by_name[info.name] = row
    for info in app.plugins:
        for clash in info.conflicts:
            kind, name, keeper = clash["kind"], clash["name"], clash["plugin"]
            hint = resolution_hint(kind, name, info.name)
            row = by_name[info.name]
            row[KIND_GROUPS[kind]].append(name)
            row["conflicts"].append({"kind": kind, "name": name, "with": keeper, "served": False, "resolve": hint})
            if keeper in by_name:
                by_name[keeper]["conflicts"].append({"kind": kind, "name": name, "with": info.name, "served": True,
                                                     "resolve": hint})
    return rows


def problem_count(rows: list[dict[str, Any]]) -> int:
    """Load errors, warnings and conflicts in all (what --strict refuses)."""
    return sum(bool(row["error"]) + len(row["warnings"]) + len(row["conflicts"]) for row in rows)


def render_rows(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["no plugins installed (entry point group 'mcpkit.plugins')"]
    lines: list[str] = []
    for row in rows:
        upstream = row.get("upstream")
        if upstream is not None:
            lines.append(f"{row['name']}  (upstream, {upstream['target']})")
            lines.append(f"  state: {_state_line(upstream)}")
        else:
            lines.append(f"{row['name']}  ({row['distribution']} {row['version']})")
        if row["error"]:
            lines.append(f"  ERROR: {row['error']}")
        clashing = {(c["kind"], c["name"]) for c in row["conflicts"]}
        for kind, key in KIND_GROUPS.items():
            if row[key]:
                names = [f"{n} [CONFLICT]" if (kind, n) in clashing else n for n in row[key]]
                lines.append(f"  {key}: {', '.join(names)}")
        for warning in row["warnings"]:
            lines.append(f"  WARNING: {warning}")
        for c in row["conflicts"]:
            if c["served"]:
                lines.append(f"  CONFLICT: {c['kind']} {c['name']!r} is also offered by plugin {c['with']!r}")
            else:
                lines.append(f"  CONFLICT: {c['kind']} {c['name']!r} is already offered by plugin {c['with']!r}; "
                             f"`mcpkit serve` refuses to start; {c['resolve']}")
    return lines


def _state_line(status: dict[str, Any]) -> str:
    """"connected (2025-11-25, server files 1.2.0)" or "failed: why"."""
    state = status["state"]
    if state == "connected":
        server = status.get("server") or {}
        who = f", server {server.get('name')} {server.get('version', '')}".rstrip() if server.get("name") else ""
        return f"connected ({status.get('protocol')}{who})"
    error = status.get("error") or "no answer"
    if state == "retrying" and "retry_in_s" not in status:
        return f"failed: {error}"
    return f"{state}: {error}"

"""``mcpkit install HOST``: add mcpkit to an MCP host's config, merging, never clobbering.

Each host keeps its servers in a JSON file under a top-level key (``mcpServers``, or ``servers``
for VS Code). The entry runs this installation's ``mcpkit serve`` by absolute path, since hosts
start servers without the user's shell (no activated venv, often a bare PATH).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click


@dataclass(frozen=True)
class Host:
    title: str
    key: str  # the top-level object holding the servers
    typed: bool  # entries carry "type": "stdio"
    restart: str


HOSTS = {
    "claude-desktop": Host("Claude Desktop", "mcpServers", False, "quit and reopen Claude Desktop"),
    "claude-code": Host("Claude Code", "mcpServers", True, "start a new Claude Code session (/mcp lists servers)"),
    "cursor": Host("Cursor", "mcpServers", False, "reload Cursor (Settings > MCP lists servers)"),
    "vscode": Host("VS Code", "servers", True, "run 'MCP: List Servers' in VS Code"),
    "mcp-json": Host("an mcp.json file", "mcpServers", False, "point your host at this file"),
}
SCOPES = {"claude-code": ("user", "project", "local"), "cursor": ("user", "project"), "vscode": ("user", "project")}


def _platform() -> str:
    return "windows" if sys.platform.startswith("win") else "macos" if sys.platform == "darwin" else "linux"


def _config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def _appdata() -> Path:
    return Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")


def config_path(host: str, scope: str = "user", project: Path | None = None) -> Path:
    """Where ``host`` keeps its MCP servers, for this OS and scope."""
    plat = _platform()
    root = project or Path.cwd()
    if host == "claude-desktop":
        if plat == "macos":
            return Path.home() / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
        if plat == "windows":
            return _appdata() / "Claude" / "claude_desktop_config.json"
        return _config_home() / "Claude" / "claude_desktop_config.json"
    if host == "claude-code":
        return root / ".mcp.json" if scope == "project" else Path.home() / ".claude.json"
    if host == "cursor":
        return root / ".cursor" / "mcp.json" if scope == "project" else Path.home() / ".cursor" / "mcp.json"
    if host == "vscode":
        if scope == "project":
            return root / ".vscode" / "mcp.json"
        if plat == "macos":
            return Path.home() / "Library" / "Application Support" / "Code" / "User" / "mcp.json"
        if plat == "windows":
            return _appdata() / "Code" / "User" / "mcp.json"
        return _config_home() / "Code" / "User" / "mcp.json"
    raise ValueError(f"unknown host {host!r}")


def mcpkit_command() -> str:
    """The absolute path of this installation's ``mcpkit`` executable."""
    exe = "mcpkit.exe" if _platform() == "windows" else "mcpkit"
    here = Path(sys.executable).parent / exe
    if here.exists():
        return str(here)
    found = shutil.which("mcpkit")
    return str(Path(found).resolve()) if found else str(here)


def server_entry(host: str, plugins: tuple[str, ...], config: str | None, env: dict[str, str],
                 paths: tuple[str, ...] = ()) -> dict[str, Any]:
    args = ["serve", *(str(Path(p).resolve()) for p in paths)]
    for name in plugins:
        args += ["--plugin", name]
    if config:
        args += ["--config", str(Path(config).resolve())]
    entry: dict[str, Any] = {"type": "stdio"} if HOSTS[host].typed else {}
    entry.update({"command": mcpkit_command(), "args": args})
    if env:
        entry["env"] = dict(env)
    return entry


def merge(path: Path, key: str, name: str, entry: dict[str, Any], *, force: bool,
          section: list[str] | None = None) -> tuple[dict[str, Any] | None, str]:
    """The file's new content with ``entry`` under ``key``/``name`` (None: nothing to change),
    and what happened. Refuses to touch a file it cannot read as a JSON object."""
    data: dict[str, Any] = {}
    if path.exists():
        text = path.read_text(encoding="utf-8")
        if text.strip():
            try:
                data = json.loads(text)
            except ValueError as exc:
                raise click.ClickException(f"{path} is not plain JSON ({exc}); nothing was written. Fix the file, "
                                           f"or add this entry under \"{key}\" by hand:\n"
                                           f"{json.dumps({name: entry}, indent=2)}") from None
            if not isinstance(data, dict):
                raise click.ClickException(f"{path} does not hold a JSON object; nothing was written")
    holder = data
    for part in section or []:
        holder = holder.setdefault(part, {})
        if not isinstance(holder, dict):
            raise click.ClickException(f"{path}: {'.'.join(section or [])} is not an object; nothing was written")
    servers = holder.setdefault(key, {})
    if not isinstance(servers, dict):
        raise click.ClickException(f"{path}: \"{key}\" is not an object; nothing was written")
    old = servers.get(name)
    if old == entry:
        return None, f"{path} already has server {name!r} as given; nothing to change"
    if old is not None and not force:
        raise click.ClickException(f"{path} already has a different server named {name!r}; use --force to replace "
                                   f"it, or --name to add mcpkit under another name")
    servers[name] = entry
    return data, f"{'replaced' if old is not None else 'added'} server {name!r} in {path}"


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write atomically; the previous file is kept as PATH.bak."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        shutil.copy2(path, path.with_name(path.name + ".bak"))
    tmp = path.with_name(f".{path.name}.mcpkit-tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if path.exists():
        shutil.copymode(path, tmp)
    os.replace(tmp, path)


def _env_pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r}: use KEY=VALUE", param_hint="--env")
        out[key.strip()] = value
    return out


def _check_paths(paths: tuple[str, ...]) -> list[str]:
    """The plugins the paths name; a path that cannot be one, or a file that does not compile,
    is refused now rather than when the host starts it."""
    from .plugins.paths import plugin_paths

    try:
        found = plugin_paths(paths)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="PATH") from None
    for pp in found:
        if not pp.is_package:
            try:
                compile(pp.path.read_bytes(), str(pp.path), "exec")
            except SyntaxError as exc:
                raise click.ClickException(f"{pp.path}, line {exc.lineno}: {exc.msg}; nothing was written "
                                           f"(`mcpkit plugins {pp.path}` shows what mcpkit makes of it)") from None
    return [pp.name for pp in found]


def _check_plugins(names: tuple[str, ...]) -> None:
    if not names:
        return
    from .plugins.loader import discover, unknown_plugins

    installed = {ep.name for ep in discover()}
    unknown = [n for n in names if n not in installed]
    if unknown:
        raise click.BadParameter(unknown_plugins(unknown, sorted(installed)), param_hint="--plugin")


@click.command("install")
@click.argument("host", type=click.Choice(list(HOSTS)))
@click.argument("paths", nargs=-1, metavar="[PATH]...", type=click.Path(exists=True))
@click.option("--name", default=None, help="The server's name in the host [default: the plugin's name for one PATH, else mcpkit].")
@click.option("--plugin", "plugins", multiple=True, metavar="NAME", help="Serve only this plugin (repeatable).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True),
              help="mcpkit config file the server reads (stored as an absolute path).")
@click.option("--env", "env_pairs", multiple=True, metavar="KEY=VALUE", help="Environment for the server (repeatable).")
@click.option("--scope", type=click.Choice(["user", "project", "local"]), default="user", show_default=True,
              help="claude-code, cursor, vscode: the user's config, or the project's (in the current directory); "
                   "claude-code also has local (this project, in ~/.claude.json).")
@click.option("--file", "file_path", type=click.Path(dir_okay=False, path_type=Path),
              help="mcp-json: merge into this file instead of printing; other hosts: use this file instead of theirs.")
@click.option("--dry-run", is_flag=True, help="Show what would be written; change nothing.")
@click.option("--force", is_flag=True, help="Replace an existing, different entry of the same name.")
def install_cmd(host: str, paths: tuple[str, ...], name: str | None, plugins: tuple[str, ...], config_path: str | None,
                env_pairs: tuple[str, ...], scope: str, file_path: Path | None, dry_run: bool, force: bool) -> None:
    """Add this mcpkit to HOST's MCP servers: claude-desktop, claude-code, cursor, vscode, or
    mcp-json (print a generic {"mcpServers": ...} snippet, or merge it into --file).

    PATH (a plugin's module file or package folder, e.g. ./weather.py) is served from where it
    is, by this installation's mcpkit, next to the installed plugins.

    Other servers in the file are kept; a file that is not plain JSON is never rewritten."""
    if scope != "user" and scope not in SCOPES.get(host, ()):
        raise click.BadParameter(f"{host} has no {scope!r} scope", param_hint="--scope")
    path_plugins = _check_paths(paths)
    _check_plugins(tuple(n for n in plugins if n not in path_plugins))
    name = name or (path_plugins[0] if len(path_plugins) == 1 else "mcpkit")
    spec = HOSTS[host]
    entry = server_entry(host, plugins, config_path, _env_pairs(env_pairs), paths)
    if host == "mcp-json" and file_path is None:
        click.echo(json.dumps({spec.key: {name: entry}}, indent=2))
        return
    path = file_path or config_path_for(host, scope)
    section = ["projects", str(Path.cwd().resolve())] if host == "claude-code" and scope == "local" and not file_path else None
    data, what = merge(path, spec.key, name, entry, force=force, section=section)
    if dry_run:
        click.echo(f"dry run, nothing written: would have {what}" if data is not None else what)
        if data is not None:
            click.echo(json.dumps({spec.key: {name: entry}}, indent=2))
        return
    if data is None:
        click.echo(what)
        return
    write_json(path, data)
    click.echo(f"{what}\nnext: {spec.restart}")


def config_path_for(host: str, scope: str) -> Path:
    return config_path(host, scope if host in SCOPES else "user")

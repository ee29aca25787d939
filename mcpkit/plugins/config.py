"""The config file (TOML) and the environment variables that override it."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PLUGIN_ENV_PREFIX = "MCPKIT_PLUGIN__"
#: the tables a config file may have
SECTIONS = ("server", "plugins", "upstreams")


@dataclass
class Config:
    server: dict[str, Any] = field(default_factory=dict)
    plugins: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``[upstreams.NAME]``: MCP servers served through mcpkit (see docs/gateway.md)
    upstreams: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    #: top-level entries of the file other than [server] and [plugins.NAME]: mistakes, reported
    #: by :func:`mcpkit.plugins.config_check.config_problems`
    stray: dict[str, Any] = field(default_factory=dict)

    def for_plugin(self, name: str, environ: dict[str, str] | None = None) -> dict[str, Any]:
        """``[plugins.NAME]`` merged with ``MCPKIT_PLUGIN__NAME__KEY=value`` variables.

        Variable values are read as TOML values when they parse (``5``, ``true``, ``["a"]``),
        else taken as plain strings.
        """
        out = dict(self.plugins.get(name, {}))
        prefix = f"{PLUGIN_ENV_PREFIX}{plugin_env_name(name)}__"
        for key, raw in (os.environ if environ is None else environ).items():
            if key.startswith(prefix):
                out[key[len(prefix):].lower()] = _value(raw)
        return out


def plugin_env_name(plugin: str) -> str:
    """How a plugin's name appears in its variables: ``invocation-log`` -> ``INVOCATION_LOG``."""
    return plugin.upper().replace("-", "_")


def _value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def load_config(path: str | os.PathLike[str] | None) -> Config:
    """Read the config file; None reads ``$MCPKIT_CONFIG`` if set, else gives defaults."""
    if path is None:
        path = os.environ.get("MCPKIT_CONFIG") or None
    if path is None:
        return Config()
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read config file {p}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"config file {p} is not valid TOML: {exc}") from None
    plugins = data.get("plugins", {})
    server = data.get("server", {})
    if not isinstance(plugins, dict) or not all(isinstance(v, dict) for v in plugins.values()):
        raise ValueError(f"config file {p}: [plugins.NAME] entries must be tables")
    if not isinstance(server, dict):
        raise ValueError(f"config file {p}: [server] must be a table")
    upstreams = data.get("upstreams", {})
    if not isinstance(upstreams, dict):
        raise ValueError(f"config file {p}: [upstreams.NAME] entries must be tables")
    stray = {k: v for k, v in data.items() if k not in SECTIONS}
    return Config(server=server, plugins=plugins, upstreams=upstreams, path=p, stray=stray)

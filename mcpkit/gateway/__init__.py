"""The gateway: any MCP server, reached over stdio or HTTP, served as an mcpkit plugin.

Upstreams come from ``[upstreams.NAME]`` tables of the config file and from
``mcpkit serve --upstream NAME=URL``; each one becomes a plugin named NAME (see docs/gateway.md).
This package sits above ``mcpkit.client`` and ``mcpkit.server`` and beside ``mcpkit.plugins``:
the command line builds it and hands its plugin objects to the loader.
"""

from __future__ import annotations

from typing import Any, Iterable

from .plugin import Gateway, UpstreamPlugin
from .settings import UpstreamConfigError, UpstreamSettings, parse_upstream, upstream_tables


def build_gateway(file_tables: dict[str, Any], cli: Iterable[str] = ()) -> Gateway:
    """The gateway for the config file's [upstreams.*] and the command line's --upstream specs;
    UpstreamConfigError (a ValueError) names the first mistake."""
    gateway = Gateway()
    for name, table in upstream_tables(file_tables, cli).items():
        gateway.add(parse_upstream(name, table))
    return gateway


__all__ = ["Gateway", "UpstreamPlugin", "UpstreamSettings", "UpstreamConfigError", "build_gateway", "parse_upstream"]

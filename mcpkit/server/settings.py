"""Server settings: defaults, then the config file's [server] table, then MCPKIT_* variables."""

from __future__ import annotations

import os
from typing import Any, Literal

import msgspec


class Settings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: str = "mcpkit"
    instructions: str | None = None
    #: seconds a tool may run when it sets no timeout of its own
    default_timeout: float = 60.0
    #: entries per page of tools/list, resources/list, prompts/list
    page_size: int = 100
    #: freshness hint on list and read results (stateless era), milliseconds
    cache_ttl_ms: int = 60_000
    cache_scope: Literal["public", "private"] = "public"
    #: secret for sealing requestState; set it when several processes serve one endpoint
    state_secret: str | None = None
    #: log level of the server's own log (stderr)
    log_level: Literal["debug", "info", "warning", "error"] = "warning"
    # -- HTTP (used by the HTTP transports) --
    host: str = "127.0.0.1"
    port: int = 8000
    extra: dict[str, Any] = {}


_ENV_PREFIX = "MCPKIT_"


def load_settings(table: dict[str, Any] | None, environ: dict[str, str] | None = None) -> Settings:
    """Build settings from a [server] table and ``MCPKIT_<FIELD>`` environment variables."""
    env = os.environ if environ is None else environ
    data = dict(table or {})
    for fname in Settings.__struct_fields__:
        value = env.get(_ENV_PREFIX + fname.upper())
        if value is not None:
            data[fname] = value
    try:
        return msgspec.convert(data, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise ValueError(f"invalid server setting: {exc}") from None

"""coredis for plugins and for the scale-out link, without its per-command environment reads.

coredis (6.x) answers ``Config.optimized`` and ``Config.otel_enabled`` by reading
``os.environ`` on every command (twice or three times each), about 5 % of a command's CPU on
trio. :func:`freeze_coredis_config` reads those variables once and keeps the answers; setting
``coredis.Config.optimized = ...`` still works afterwards. The rest of a command's cost (~100 µs
of CPU against ~13 µs for the bare socket round trip) is coredis's connection design — a writer
task and a reader task the command passes through, with anyio cancel scopes at each step — which
no setting changes: send several commands in one pipeline (docs/writing-plugins.md).
"""

from __future__ import annotations

from typing import Any

from .._extras import require

_frozen = False


def freeze_coredis_config() -> None:
    """Make coredis read its environment variables once instead of on every command."""
    global _frozen
    if _frozen:
        return
    import coredis

    config = coredis.Config
    base = type(config)
    frozen: dict[str, Any] = {}
    names = [n for n in ("optimized", "otel_enabled", "otel_capture_command_args")
             if isinstance(getattr(base, n, None), property)]
    if not names:  # another coredis: leave it as it is
        _frozen = True
        return
    for name in names:
        frozen[name] = getattr(config, name)

    def make(name: str, original: property) -> property:
        def get(self: Any) -> Any:
            return frozen[name]

        def set_(self: Any, value: Any) -> None:
            if original.fset is not None:
                original.fset(self, value)
            frozen[name] = original.fget(self) if original.fget is not None else value

        return property(get, set_ if original.fset is not None else None, doc=original.__doc__)

    config.__class__ = type("FrozenConfig", (base,), {n: make(n, getattr(base, n)) for n in names})
    _frozen = True


def redis_client(url: str, *, timeout: float | None = 5.0, decode_responses: bool = True, **options: Any) -> Any:
    """A ``coredis.Redis`` for a plugin: ``redis://``, ``rediss://`` or ``unix://`` URL,
    ``timeout`` seconds to connect and per command (None: none), strings rather than bytes by
    default. Return it from ``mcpkit_lifespan`` (it is an async context manager) so it is
    connected at start and closed with the plugin; ``options`` go to ``coredis.Redis.from_url``.
    Needs the ``redis`` extra (coredis): a plugin using it depends on ``mcpkit[redis]``."""
    require("redis", "mcpkit.redis_client()")
    import coredis

    freeze_coredis_config()
    return coredis.Redis.from_url(url, connect_timeout=timeout, stream_timeout=timeout,
                                  decode_responses=decode_responses, **options)

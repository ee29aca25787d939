"""The optional parts of mcpkit and the packages each needs (pyproject.toml's extras).

``pip install mcpkit`` brings what every server and client uses: stdio, Streamable HTTP and
legacy SSE on mcpkit's own HTTP server, and the MCP client. A setting that needs more names its
extra in one line when its packages are missing (:class:`MissingExtra`), instead of a traceback.
Imported by every layer, it imports nothing of mcpkit.
"""

from __future__ import annotations

import importlib

#: each extra: the modules its packages provide (what ``pip install 'mcpkit[NAME]'`` adds)
EXTRAS: dict[str, tuple[str, ...]] = {
    "redis": ("coredis",),  # state = redis://…: sessions, replay, notifications, tasks shared
    "oauth": ("jwt", "cryptography"),  # JWT access tokens (server), DPoP and signed assertions (client)
    "hypercorn": ("hypercorn",),  # --server hypercorn (HTTP/2)
    "otel": ("opentelemetry.sdk.trace",),  # traces = true (--traces), OTLP metrics (OTEL_METRICS_EXPORTER=otlp)
}


class MissingExtra(ImportError):
    """A setting or feature needs an extra whose packages are not installed; the message is
    the one line to show: what needs it and the pip command that adds it."""


def require(extra: str, what: str) -> None:
    """Import the packages of ``extra``, or raise :class:`MissingExtra` saying that ``what``
    (a setting, a feature) needs it."""
    for module in EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise MissingExtra(f"{what} needs the {extra} extra: pip install 'mcpkit[{extra}]'",
                               name=exc.name or module) from None

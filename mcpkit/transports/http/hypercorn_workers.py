"""Several worker processes behind one listening socket (``--workers N``).

Hypercorn starts each worker with the spawn method and imports ``app`` from this module there;
the parent passes its command line through ``MCPKIT_HTTP_WORKER``. Each process loads the plugins
and holds its own sessions; see docs/http.md for what is shared and what is not. The parent binds
the socket itself (hypercorn takes it as an ``fd://`` bind), so a port in use is one line; a
worker whose parent dies answers what it runs and exits (see ``HttpApp.leave_when_orphaned``).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from typing import Any

ENV = "MCPKIT_HTTP_WORKER"


def run_workers(selection: dict[str, Any], settings_overrides: dict[str, Any], workers: int) -> int:
    from .serve import hyper_binds, hyper_config, need_hypercorn, urls

    need_hypercorn()
    from hypercorn.config import Config
    from hypercorn.run import run

    from ...plugins.config import load_config
    from .binding import listen

    os.environ[ENV] = json.dumps({"selection": selection, "settings": settings_overrides})
    # requestState must verify in whichever process the retry lands on
    os.environ.setdefault("MCPKIT_STATE_SECRET", secrets.token_hex(32))
    settings = _settings(load_config(selection.get("config_path")), settings_overrides)
    config: Config = hyper_config(_FakeApp(settings))  # type: ignore[arg-type]
    config.workers = workers
    config.worker_class = "trio"
    config.application_path = "mcpkit.transports.http.hypercorn_workers:app"
    sockets = listen(settings)
    try:
        hyper_binds(config, sockets)
        for url in urls(sockets, bool(settings.certfile and settings.keyfile)):
            print(f"mcpkit: serving MCP on {url}/mcp (legacy SSE on {url}/sse) with {workers} hypercorn workers",
                  file=sys.stderr, flush=True)
            if settings.console:
                print(f"mcpkit: console on {url}/console (each worker merges the others' snapshots)", file=sys.stderr, flush=True)
        return run(config)
    finally:
        for sock in sockets:
            sock.close()


class _FakeApp:
    def __init__(self, settings: Any) -> None:
        self.settings = settings


def _settings(config: Any, overrides: dict[str, Any]) -> Any:
    from ...server.settings import load_settings

    table = {k: v for k, v in config.server.items() if k not in ("plugins", "disable", "strict", "plugin_paths")}
    return load_settings(table, overrides=overrides)


def _build() -> Any:
    import multiprocessing

    from ...plugins import loader
    from ...plugins.config import load_config
    from ...server.logs import log_http_requests, setup_logging
    from .asgi import HttpApp

    spec = json.loads(os.environ[ENV])
    sel = spec["selection"]
    config = load_config(sel.get("config_path"))
    settings = _settings(config, spec["settings"])
    setup_logging(settings.log_level)  # a spawned process starts with no logging set up
    log_http_requests()
    from ...gateway import build_gateway

    gateway = build_gateway(config.upstreams, sel.get("upstreams", ()))
    loaded = loader.load(sel.get("only", ()), sel.get("disable", ()), strict=sel.get("strict", False), extra=gateway.plugins,
                         paths=sel.get("paths", ()))
    app = loader.build_app(loaded, config, settings, strict=sel.get("strict", False))
    gateway.attach(app)
    http_app = HttpApp(app, loader.lifespans(loaded, config), strict=sel.get("strict", False), legacy_only=sel.get("legacy_only", False))
    parent = multiprocessing.parent_process()
    if parent is not None and parent.sentinel is not None:  # readable (at its end) once hypercorn's supervisor is gone
        http_app.orphan_fd = parent.sentinel
    return http_app


app = _build() if ENV in os.environ else None

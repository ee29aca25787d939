"""``mcpkit dev ./weather.py``: serve a plugin file or folder and reload it on every save.

It serves what ``mcpkit serve`` would (the installed plugins too), over stdio for a host or over
HTTP, and watches the plugins given by path. A save re-imports the plugin in place (see
:mod:`mcpkit.plugins.reload`): connected clients get ``notifications/tools/list_changed`` (and
prompts, resources) for what changed, calls in flight finish on the old code, and a save that
does not import or load leaves the last good version serving, with the error on stderr.
"""

from __future__ import annotations

import socket
from typing import Any

import click
import trio

from .cli import _failure, _one_line, _prepare, _selection, serving_summary


def console_url(app: Any, base: str) -> str | None:
    """Where the browser console of this app is (its try-it page shows each save), or None.

    The HTTP app sets ``app.console_path`` (``"/console"``) when it serves the console (the
    ``console`` setting; ``mcpkit dev --transport http`` turns it on)."""
    path = getattr(app, "console_path", None)
    return f"{base}{path}" if path else None


@click.command("dev")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True,
              help="stdio (for a host that starts the server), or http (Streamable HTTP on /mcp plus legacy SSE).")
@click.option("--host", default=None, help="HTTP bind address [default: 127.0.0.1].")
@click.option("--port", type=int, default=None, help="HTTP port [default: 8000; 0 picks a free one].")
@click.option("--allow-origin", "allow_origins", multiple=True, metavar="ORIGIN",
              help="Extra allowed Origin (repeatable). Loopback origins are always allowed.")
@click.option("--auth-token", envvar="MCPKIT_AUTH_TOKEN", default=None, help="Require this bearer token on HTTP requests.")
@click.option("--poll", is_flag=True, help="Watch by polling file times even when watchfiles is installed.")
@click.option("--console/--no-console", default=True, show_default=True,
              help="With --transport http: serve the browser console on /console (try-it forms that follow each save).")
@click.option("--console-token", envvar="MCPKIT_CONSOLE_TOKEN", default=None,
              help="Operator token that opens the console to other addresses (not an MCP token).")
@_selection
def dev_cmd(transport: str, host: str | None, port: int | None, allow_origins: tuple[str, ...], auth_token: str | None,
            poll: bool, console: bool, console_token: str | None, only: tuple[str, ...], disable: tuple[str, ...], config_path: str | None, strict: bool,
            upstreams: tuple[str, ...], paths: tuple[str, ...], plugin_path: tuple[str, ...]) -> None:
    """Serve the plugins in the files or folders PATH (and the installed ones), reloading each
    one when it is saved.

    Clients stay connected across a reload and are told what changed; a save that does not
    load is reported here and the last good version keeps serving."""
    overrides: dict[str, Any] = {k: v for k, v in (("host", host), ("port", port), ("auth_token", auth_token))
                                 if v is not None}
    if allow_origins:
        overrides["allow_origins"] = list(allow_origins)
    if transport == "http":
        overrides["console"] = console
        if console_token is not None:
            overrides["console_token"] = console_token
    baseline = _baseline((*paths, *plugin_path))
    app, loaded, config, strict = _prepare(only, disable, config_path, strict, overrides, upstreams=upstreams,
                                           paths=(*paths, *plugin_path), reloading=True)
    if not loaded.paths:
        raise click.UsageError("mcpkit dev reloads plugins given by path: name a module file or package folder, "
                               "e.g. mcpkit dev ./weather.py (or set plugin_paths in [server])")
    from .server.errors import StartupError

    try:
        _run(app, loaded, config, strict, transport, poll, baseline)
    except StartupError as exc:
        raise click.ClickException(_one_line(exc, str(exc))) from None


def _baseline(given: tuple[str, ...]) -> dict[Any, Any]:
    """The plugin files as they are before they load: a save the watcher starts too late to see
    is caught by comparing with this."""
    from .plugins.paths import plugin_paths
    from .plugins.watch import snapshot

    try:
        return snapshot({pp.name: pp.root for pp in plugin_paths(given)})
    except (ValueError, OSError):
        return {}  # the load reports it


def _run(app: Any, loaded: Any, config: Any, strict: bool, transport: str, poll: bool, baseline: dict[Any, Any]) -> None:
    from .plugins.loader import lifespans
    from .plugins.reload import Reloader
    from .plugins.watch import POLL_S, backend

    sockets: list[socket.socket] = []
    if transport == "http":
        from .server.logs import log_http_requests
        from .transports.http.binding import listen
        from .transports.http.console import check_console_settings

        if app.settings.console:
            try:
                check_console_settings(app.settings)
            except ValueError as exc:
                raise click.ClickException(str(exc)) from None
        log_http_requests()
        sockets = listen(app.settings)
    others = lifespans(loaded, config, skip=loaded.paths)
    reloader = Reloader(app, loaded, config, strict=strict)
    how = "polling" if poll or backend() == "polling" else "watchfiles"
    watching = ", ".join(str(pp.path) for pp in loaded.paths.values())
    hint = f"polling every {POLL_S * 1000:.0f} ms; pip install 'mcpkit[dev]' to be told by the OS" if how == "polling" else how
    note = f"watching {watching} ({hint})"

    async def run_stdio() -> None:
        from .server.lifespan import plugin_lifespans
        from .transports.stdio import serve_stdio

        async with plugin_lifespans(app, others, strict=strict), reloader.running(), trio.open_nursery() as nursery:
            nursery.start_soon(_reload_on_save, reloader, how == "polling", baseline)
            click.echo(f"mcpkit dev: {serving_summary(app)} on stdio; {note}", err=True)
            await serve_stdio(app)
            nursery.cancel_scope.cancel()

    async def run_http() -> None:
        from .transports.http.serve import serve_http

        async with reloader.running(), trio.open_nursery() as nursery:
            async def serving(task_status: trio.TaskStatus[list[str]]) -> None:
                await serve_http(app, others, strict=strict, sockets=sockets, task_status=task_status)
                nursery.cancel_scope.cancel()  # stopped (a signal): the watcher goes too

            binds = await nursery.start(serving)
            click.echo(f"mcpkit dev: {serving_summary(app)}; {note}", err=True)
            for bind in binds:
                url = console_url(app, bind)
                if url:
                    click.echo(f"mcpkit dev: try it in the browser: {url}", err=True)
            nursery.start_soon(_reload_on_save, reloader, how == "polling", baseline)

    try:
        trio.run(run_stdio if transport == "stdio" else run_http)
    except Exception as exc:
        raise click.ClickException(_one_line(exc, _failure(exc, transport))) from None
    finally:
        for sock in sockets:
            sock.close()


#: after the watcher starts, the files are compared with how they were before loading
CATCH_UP_S = 0.2


async def _reload_on_save(reloader: Any, force_polling: bool, baseline: dict[Any, Any]) -> None:
    """Reload each plugin whose files differ from how they were when it was last read: one
    save the watcher reports twice (a write, then a rename) reloads once, and a save made
    while the watcher was starting is not missed."""
    from .plugins.watch import changes, snapshot

    roots = {name: pp.root for name, pp in reloader.loaded.paths.items()}
    read_as = {name: {p: v for p, v in baseline.items() if p == root or root in p.parents} for name, root in roots.items()}
    for name in [name for name, files in read_as.items() if not files]:  # given by the config file
        read_as[name] = await trio.to_thread.run_sync(snapshot, {name: roots[name]})

    async def reload(names: set[str]) -> None:
        for name in sorted(names):
            now = await trio.to_thread.run_sync(snapshot, {name: roots[name]})
            if now == read_as[name]:
                continue  # nothing new since it was read
            read_as[name] = now  # taken before the import: a save during it is seen next time
            result = await reloader.reload(name)
            click.echo(f"mcpkit dev: {result.summary()}", err=True)
            for warning in result.warnings:
                click.echo(f"mcpkit dev: plugin {name}: WARNING: {warning}", err=True)

    async def catch_up() -> None:
        await trio.sleep(CATCH_UP_S)
        await reload(set(roots))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(catch_up)
        async for names in changes(roots, force_polling=force_polling):
            await reload(names)


__all__ = ["dev_cmd", "console_url"]

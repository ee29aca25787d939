"""The ``mcpkit`` command line."""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import sys
from typing import Any, Iterator

import click

from ._version import __version__

log = logging.getLogger("mcpkit")


class _Group(click.Group):
    """Adds the commands plugins contribute, loading plugins only when they are needed."""

    _plugin_cmds: dict[str, click.Command] | None = None

    def _plugins(self) -> dict[str, click.Command]:
        if self._plugin_cmds is None:
            from .plugins import loader

            self._plugin_cmds = {}
            for cmd in loader.cli_commands(loader.load()):
                if cmd.name and cmd.name not in self.commands:
                    self._plugin_cmds[cmd.name] = cmd
        return self._plugin_cmds

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(_LAZY) | set(self._plugins()))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in _LAZY and name not in self.commands:  # imported only when used
            module, attr = _LAZY[name]
            self.add_command(getattr(importlib.import_module(module), attr), name)
        return super().get_command(ctx, name) or self._plugins().get(name)


#: commands whose modules load only when the command runs (serve's start-up does not pay for them)
_LAZY = {"new": ("mcpkit.scaffold", "new_cmd"), "install": ("mcpkit.hosts", "install_cmd"),
         "dev": ("mcpkit.dev", "dev_cmd"),
         # the client commands: `mcpkit serve` never pays for importing the client and httpx
         "tools": ("mcpkit.client.commands", "tools_cmd"), "call": ("mcpkit.client.commands", "call_cmd"),
         "discover": ("mcpkit.client.commands", "discover_cmd"), "task": ("mcpkit.client.commands", "task_group"),
         "logout": ("mcpkit.client.oauth.cli_options", "logout_cmd")}


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="mcpkit")
def main() -> None:
    """Serve MCP tools from plugins, and inspect what is installed."""


def _selection(f: Any) -> Any:
    f = click.option("--plugin-path", "plugin_path", multiple=True, metavar="PATH",
                     type=click.Path(exists=True, dir_okay=True),
                     help="Also load this module file or package folder as a plugin named after it (repeatable; "
                          "the same as giving PATH as an argument).")(f)
    f = click.argument("paths", nargs=-1, metavar="[PATH]...", type=click.Path(exists=True, dir_okay=True))(f)
    f = click.option("--strict", is_flag=True, help="Make any plugin or config mistake fatal (mcpkit plugins: exit 1).")(f)
    f = click.option("--config", "config_path", type=click.Path(dir_okay=False), envvar="MCPKIT_CONFIG",
                     help="TOML file with [server] settings and [plugins.NAME] tables.")(f)
    f = click.option("--disable", multiple=True, metavar="NAME", help="Do not load this plugin (repeatable).")(f)
    f = click.option("--plugin", "only", multiple=True, metavar="NAME", help="Load only this plugin (repeatable).")(f)
    f = click.option("--upstream", "upstreams", multiple=True, metavar="NAME=URL",
                     help="Serve the MCP server at URL as the plugin NAME (repeatable; commands go in the "
                          "config file as [upstreams.NAME]; see docs/gateway.md).")(f)
    return f


def _prepare(only: tuple[str, ...], disable: tuple[str, ...], config_path: str | None, strict: bool,
             overrides: dict[str, Any] | None = None, listing: bool = False, upstreams: tuple[str, ...] = (),
             paths: tuple[str, ...] = (), reloading: bool = False) -> Any:
    """Config, settings, plugins and the app. ``listing`` (mcpkit plugins) collects every problem
    instead of stopping at the first, whatever ``strict`` says. ``paths``: plugins given by path
    on the command line (they replace the ``plugin_paths`` setting)."""
    from ._extras import MissingExtra
    from .gateway import build_gateway
    from .plugins import loader
    from .plugins.config import load_config
    from .plugins.config_check import report_config_problems
    from .plugins.paths import setting_paths
    from .server.logs import setup_logging
    from .server.settings import load_settings

    try:
        config = load_config(config_path)
        table = dict(config.server)
        named_on_command_line = bool(only or disable)
        only = only or tuple(table.pop("plugins", ()) or _env_list("MCPKIT_PLUGINS"))
        disable = disable or tuple(table.pop("disable", ()) or _env_list("MCPKIT_DISABLE"))
        where = f"[server] of {config.path}" if config.path else "[server]"
        from_settings = table.pop("plugin_paths", None)
        if not paths:
            base = config.path.parent if config.path else None
            paths = tuple(setting_paths(from_settings, base, where) if from_settings is not None
                          else _env_list("MCPKIT_PLUGIN_PATHS", os.pathsep))
        strict = strict or bool(table.pop("strict", False))
        settings = load_settings(table, overrides=overrides, table_name=where)
        setup_logging(settings.log_level)
        fatal = strict and not listing
        gateway = build_gateway(config.upstreams, upstreams)
        loaded = loader.load(only, disable, strict=fatal, unknown_names="error" if named_on_command_line else "warn",
                             extra=gateway.plugins, paths=paths)
        loaded.warnings.extend(report_config_problems(config, loaded.installed, strict=fatal))
        app = loader.build_app(loaded, config, settings, strict=fatal, keep_conflicts=listing)
        gateway.attach(app)
        app.reloading = reloading
    except (ValueError, loader.PluginError, MissingExtra) as exc:  # state = redis://… without its extra, too
        raise click.ClickException(str(exc)) from None
    return app, loaded, config, strict


def _env_list(name: str, sep: str = ",") -> list[str]:
    return [p.strip() for p in os.environ.get(name, "").split(sep) if p.strip()]


@main.command()
@click.option("--transport", type=click.Choice(["stdio", "http", "sse"]), default="stdio", show_default=True,
              help="stdio; http (Streamable HTTP on /mcp plus legacy SSE); sse (legacy HTTP+SSE only).")
@click.option("--host", default=None, help="HTTP bind address [default: 127.0.0.1].")
@click.option("--port", type=int, default=None, help="HTTP port [default: 8000; 0 picks a free one].")
@click.option("--allow-origin", "allow_origins", multiple=True, metavar="ORIGIN",
              help="Extra allowed Origin (repeatable; * allows any). Loopback origins are always allowed.")
@click.option("--auth-token", envvar="MCPKIT_AUTH_TOKEN", default=None, help="Require this bearer token on HTTP requests (development).")
@click.option("--auth", "auth_verifier", metavar="VERIFIER", default=None,
              help="Authorize HTTP requests with OAuth access tokens: jwt, introspection, or a provider plugin's name "
                   "(see docs/auth.md; the rest of [server.auth] comes from the config file or MCPKIT_AUTH__* variables).")
@click.option("--auth-issuer", metavar="URL", default=None, help="The authorization server whose tokens are accepted.")
@click.option("--auth-resource", metavar="URL", default=None,
              help="This server's canonical URL, e.g. https://mcp.example.com/mcp (tokens must be issued for it). "
                   "Required with authorization unless --host is loopback; there it defaults to the bound "
                   "http(s)://127.0.0.1:PORT/mcp (or localhost:PORT).")
@click.option("--workers", type=int, default=None, help="HTTP worker processes [default: 1].")
@click.option("--metrics", is_flag=True, default=None,
              help="Count requests, sessions and refusals; serve them as Prometheus text on GET /metrics "
                   "(loopback, or the bearer metrics_token). See docs/observability.md.")
@click.option("--state", metavar="URL", default=None,
              help="Share sessions, streams, notifications and tasks with other processes through Redis: "
                   "redis://host:6379/0 or rediss://... [default: memory, each process its own]. See docs/deploy.md.")
@click.option("--server", "http_server", type=click.Choice(["mcpkit", "hypercorn"]), default=None,
              help="HTTP server: mcpkit's own HTTP/1.1 server, or hypercorn (HTTP/2) [default: mcpkit].")
@click.option("--certfile", type=click.Path(exists=True, dir_okay=False), default=None, help="Serve HTTPS with this PEM certificate chain.")
@click.option("--keyfile", type=click.Path(exists=True, dir_okay=False), default=None, help="The private key of --certfile (PEM).")
@click.option("--console", is_flag=True, default=None,
              help="Serve the browser console on /console (HTTP): plugins, tools, live calls, try-it forms; "
                   "loopback clients only unless --console-token (docs/console.md).")
@click.option("--console-token", envvar="MCPKIT_CONSOLE_TOKEN", default=None,
              help="Operator token that opens the console to other addresses (not an MCP token).")
@click.option("--traces", is_flag=True, default=False,
              help="Export a span per request over OTLP/HTTP, configured by the OTEL_* variables (needs mcpkit[otel]; "
                   "docs/observability.md).")
@_selection
def serve(transport: str, host: str | None, port: int | None, allow_origins: tuple[str, ...], auth_token: str | None,
          auth_verifier: str | None, auth_issuer: str | None, auth_resource: str | None, workers: int | None, metrics: bool | None, state: str | None, http_server: str | None, certfile: str | None, keyfile: str | None,
          console: bool | None, console_token: str | None, traces: bool, only: tuple[str, ...], disable: tuple[str, ...], config_path: str | None, strict: bool,
          upstreams: tuple[str, ...], paths: tuple[str, ...], plugin_path: tuple[str, ...]) -> None:
    """Serve the installed plugins' tools over MCP (stdio by default), the plugins in the module
    files or package folders PATH (each named after its file or folder), and any MCP server
    named with --upstream or [upstreams.NAME] (docs/gateway.md)."""
    given = (("host", host), ("port", port), ("auth_token", auth_token), ("workers", workers), ("metrics", metrics), ("state", state), ("http_server", http_server),
             ("certfile", certfile), ("keyfile", keyfile), ("console", console), ("console_token", console_token))
    overrides: dict[str, Any] = {k: v for k, v in given if v is not None}
    if allow_origins:
        overrides["allow_origins"] = list(allow_origins)
    if traces:
        overrides["traces"] = True
    auth = {k: v for k, v in (("verifier", auth_verifier), ("issuer", auth_issuer), ("resource", auth_resource)) if v}
    if auth:
        overrides["auth"] = auth
    paths = (*paths, *plugin_path)
    app, loaded, config, strict = _prepare(only, disable, config_path, strict, overrides, upstreams=upstreams, paths=paths)
    from .server.errors import StartupError

    try:
        code = _serve(app, loaded, config, strict, transport,
                      {"only": list(only), "disable": list(disable), "config_path": config_path, "strict": strict,
                       "legacy_only": transport == "sse", "upstreams": list(upstreams),
                       "paths": [str(pp.path) for pp in loaded.paths.values()]}, overrides)
    except StartupError as exc:
        raise click.ClickException(_one_line(exc, str(exc))) from None
    if code:
        sys.exit(code)


def _serve(app: Any, loaded: Any, config: Any, strict: bool, transport: str, selection: dict[str, Any],
           overrides: dict[str, Any]) -> int:
    """Serve until stopped; the exit status. What stops the start is a StartupError (one line)."""
    import socket

    if app.settings.traces:
        from .server.tracing import need_otel

        _start_check(need_otel)

    from .server.metrics_otlp import check_otlp_extra

    _start_check(check_otlp_extra, app.settings)
    if transport != "stdio":
        from .server.logs import log_http_requests

        _check_auth(app)
        if app.settings.http_server == "hypercorn":
            from .transports.http.serve import need_hypercorn

            _start_check(need_hypercorn)
        log_http_requests()  # in every process: the workers inherit it (or set it up the same way)
        if app.settings.console:
            from .transports.http.console import check_console_settings

            _start_check(check_console_settings, app.settings)
    elif overrides.get("console"):  # a config file's console = true is for its HTTP runs; stdio ignores it
        raise click.UsageError("the console is served over HTTP: add --transport http (or use mcpkit dev --transport http)")
    if transport != "stdio" and app.settings.workers > 1:
        share: Any = contextlib.nullcontext()
        if app.settings.console:
            from .transports.http.console import shared_folder

            share = shared_folder(app.settings)
        with share, _shared_metrics_dir(app, overrides):  # the folders of the workers' console and metrics snapshots
            return _serve_workers(app, loaded, config, strict, transport, selection, overrides)
    import trio

    from .plugins.loader import lifespans

    sockets: list[socket.socket] = []
    if transport != "stdio":  # a port in use or a bad certificate fails now, before the plugins start
        from .transports.http.binding import listen

        sockets = listen(app.settings)

    async def run_stdio() -> None:
        from .server.lifespan import plugin_lifespans
        from .transports.stdio import serve_stdio

        from .server.metrics_otlp import enable_otlp_metrics

        otlp = enable_otlp_metrics(app)
        async with trio.open_nursery() as nursery:
            if otlp is not None:
                nursery.start_soon(otlp.export_forever)  # the last export when the nursery ends
            async with plugin_lifespans(app, lifespans(loaded, config), strict=strict):
                click.echo(f"mcpkit: {serving_summary(app)} on stdio", err=True)
                await serve_stdio(app)
            nursery.cancel_scope.cancel()

    async def run_http() -> None:
        from .transports.http.serve import serve_http

        await serve_http(app, lifespans(loaded, config), strict=strict, legacy_only=transport == "sse", sockets=sockets)

    try:
        trio.run(run_stdio if transport == "stdio" else run_http)
    except Exception as exc:  # through trio's exception groups: what stopped it, in one line
        raise click.ClickException(_one_line(exc, _failure(exc, transport))) from None
    finally:
        for sock in sockets:
            sock.close()
    return 0


def _serve_workers(app: Any, loaded: Any, config: Any, strict: bool, transport: str, selection: dict[str, Any],
                   overrides: dict[str, Any]) -> int:
    if app.settings.http_server == "hypercorn":
        from .transports.http.hypercorn_workers import run_workers

        return run_workers(selection, overrides, app.settings.workers)
    from .plugins.loader import lifespans as plugin_lifespans
    from .transports.http.forked_workers import run_forked

    return run_forked(app, plugin_lifespans(loaded, config), strict=strict, legacy_only=transport == "sse")


@contextlib.contextmanager
def _shared_metrics_dir(app: Any, overrides: dict[str, Any]) -> Iterator[None]:
    """With --metrics and --workers, the folder where the workers share their metrics (made
    here and removed at the end, unless metrics_dir names one), so /metrics on any worker
    shows them all."""
    s = app.settings
    if not s.metrics or s.metrics_dir:
        yield
        return
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="mcpkit-metrics-")
    s.metrics_dir = overrides["metrics_dir"] = folder  # forked workers inherit it; hypercorn's get it passed
    try:
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _failure(exc: Exception, transport: str) -> str:
    """The line for what stopped the server: a start-up error, a plugin's refusal, the system
    refusing a resource, a missing package. Anything else is a bug: it is raised as it is."""
    from ._extras import MissingExtra
    from .server.errors import StartupError

    for leaf in _leaves(exc):
        if isinstance(leaf, (StartupError, RuntimeError, MissingExtra)):
            return str(leaf)
        if isinstance(leaf, ImportError):
            return f"the {transport} transport needs a package that is not installed: {leaf.name}"
        if isinstance(leaf, OSError):
            return f"cannot serve: {leaf.strerror or leaf}"
    raise exc


def _one_line(exc: BaseException, line: str) -> str:
    """``line``; the traceback goes to the log too when the log level is debug."""
    log.debug("the server stopped: %s", line, exc_info=exc)
    return line


def _check_auth(app: Any) -> None:
    """Refuse to start on authorization settings that cannot work (before any worker starts)."""
    from .transports.http.authorization import ResourceServer

    async def never(*args: Any) -> None:
        return None

    _start_check(ResourceServer.from_app, app, never)


def _start_check(check: Any, *args: Any) -> None:
    """Run a start-up check: a ValueError or a missing extra stops the start in one line."""
    from ._extras import MissingExtra

    try:
        check(*args)
    except (ValueError, MissingExtra) as exc:
        raise click.ClickException(str(exc)) from None


@main.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@_selection
def plugins_cmd(as_json: bool, only: tuple[str, ...], disable: tuple[str, ...], config_path: str | None, strict: bool,
                upstreams: tuple[str, ...], paths: tuple[str, ...], plugin_path: tuple[str, ...]) -> None:
    """List discovered plugins (and those in the files or folders PATH) with what each offers,
    load errors, warnings and name conflicts.

    Upstreams (docs/gateway.md) are connected once to list what they offer and their state.
    Exits 0 whatever it finds; with --strict (or strict = true in the file), 1 when anything is wrong."""
    from .plugins.report import plugin_rows, problem_count, render_rows

    app, loaded, config, strict = _prepare(only, disable, config_path, strict, listing=True, upstreams=upstreams,
                                           paths=(*paths, *plugin_path))
    _probe_upstreams(app, loaded, config)
    rows = plugin_rows(app)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        for line in render_rows(rows):
            click.echo(line)
    problems = problem_count(rows) + len(loaded.warnings)
    if strict and problems:
        click.echo(f"mcpkit plugins: {problems} problem{'s' if problems != 1 else ''} (fatal with --strict)", err=True)
        sys.exit(1)


def _probe_upstreams(app: Any, loaded: Any, config: Any) -> None:
    """Connect each selected upstream once (concurrently, within its connect timeout) so the
    report shows what it offers, or why it cannot be reached."""
    if not any(info.status is not None for info in app.plugins):
        return
    import contextlib

    import trio

    from .plugins.loader import lifespans

    for info in app.plugins:
        plugin = loaded.manager.get_plugin(info.name) if info.status is not None else None
        if plugin is not None:
            plugin.settings.max_attempts = 1  # one try: "failed" and why, not "retrying"

    async def probe() -> None:
        async with contextlib.AsyncExitStack() as stack:
            for name, cm in lifespans(loaded, config):
                if any(info.name == name and info.status is not None for info in app.plugins):
                    await stack.enter_async_context(cm)

    logging.getLogger("mcpkit.gateway").setLevel(logging.ERROR)  # the report says it
    trio.run(probe)


def serving_summary(app: Any) -> str:
    """"serving 6 tools from plugins codesearch, openapi" (the start-up banner)."""
    tools = len(app.registry.tools)
    names = [info.name for info in app.plugins if info.loaded]
    plugins = f"plugin{'s' if len(names) != 1 else ''} {', '.join(names)}" if names else "no plugins"
    return f"serving {tools} tool{'s' if tools != 1 else ''} from {plugins}"


if __name__ == "__main__":
    main()

"""``mcpkit tools``, ``mcpkit call`` and ``mcpkit discover``: the client from the command line.

Exit codes: 0 success, 1 the tool reported an error (isError), 2 the server could not be reached,
answered garbage, or refused the request. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from typing import Any, Callable, NoReturn

import click

from .oauth.cli_options import build_oauth, logout_cmd, oauth_options

TARGET_HELP = "A server URL (http:// or https://). Use --stdio instead for a server run as a subprocess."


def _target_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--stdio", "stdio", metavar="COMMAND", help='Run the server as a subprocess: --stdio "mcpkit serve".'),
        click.option("--mode", type=click.Choice(["auto", "stateless", "handshake"]), default="auto",
                     show_default=True, help="Protocol era: probe, or pin one."),
        click.option("--protocol-version", metavar="VERSION", help="Pin an exact protocol version."),
        click.option("--timeout", type=float, default=60.0, show_default=True, help="Seconds per request."),
        click.option("--header", "headers", multiple=True, metavar="NAME:VALUE", help="Extra HTTP header (repeatable)."),
        click.option("--auth-token", envvar="MCPKIT_CLIENT_TOKEN", help="Bearer token for HTTP servers."),
    ]
    for option in reversed(options):
        f = option(f)
    f = oauth_options(f)
    return click.argument("target", required=False, metavar="[TARGET]")(f)


def _fail(message: str, code: int = 2) -> NoReturn:
    # One line, whatever the message carries (an HTML error page, a multi-line server message).
    message = " ".join(part.strip() for part in message.splitlines() if part.strip())
    click.echo(f"mcpkit: {message}", err=True)
    sys.exit(code)


def _run(work: Callable[..., Any], target: str | None, stdio: str | None, mode: str,
         protocol_version: str | None, timeout: float, headers: tuple[str, ...], auth_token: str | None,
         prefetch: bool = True, tasks: bool = False, **oauth: Any) -> Any:
    """Connect, run ``work(client)``, and turn every failure into one line and exit code 2.

    A stdio server's stderr (its banner, its log) is kept off the terminal; when the connection
    fails, its last line is quoted in the error."""
    import tempfile

    import trio

    from . import McpError, connect

    if bool(target) == bool(stdio):
        _fail("give a server URL or --stdio COMMAND (exactly one)")
    if target and not target.lower().startswith(("http://", "https://")):
        _fail(f"TARGET must be an http(s):// URL, got {target!r}; for a command use --stdio {shlex.quote(target)}")
    extra: dict[str, str] = {}
    for item in headers:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            _fail(f"--header needs NAME:VALUE, got {item!r}")
        extra[name.strip()] = value.strip()

    server_stderr = tempfile.TemporaryFile() if stdio else None
    authorization = build_oauth(**oauth)

    async def main() -> Any:
        async with connect(target or stdio or "", mode=mode, protocol_version=protocol_version,
                           request_timeout=timeout, initialize_timeout=timeout, headers=extra,
                           auth_token=auth_token, prefetch_tools=prefetch, server_stderr=server_stderr,
                           tasks=tasks, oauth=authorization) as client:
            return await work(client)

    try:
        return trio.run(main)
    except McpError as exc:
        said = _last_line(server_stderr) if exc.code in _LINK_ERRORS else ""
        hint = _auth_hint(exc, target, asked_oauth=authorization is not None, gave_token=bool(auth_token))
        _fail((f"{exc} (the server's stderr: {said})" if said else str(exc)) + hint)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except Exception as exc:  # never a traceback on the command line
        _fail(f"E199: {type(exc).__name__}: {exc}")


def _auth_hint(exc: Any, target: str | None, *, asked_oauth: bool, gave_token: bool) -> str:
    """What to try when the server wants a token: --oauth if its metadata names an
    authorization server, --auth-token if it names none (a server with a fixed token)."""
    from .errors import AuthorizationFailed

    wants_token = exc.http_status == 401 and not asked_oauth and not gave_token
    if not target or not (wants_token or isinstance(exc, AuthorizationFailed)):
        return ""
    oauth = _names_authorization_server(target, exc.www_authenticate)
    if not wants_token:  # --oauth failed
        return " (if the server takes a fixed token, pass it with --auth-token instead)" if oauth is False else ""
    if oauth:
        return " (the server wants authorization: try --oauth)"
    if oauth is False:
        return " (the server wants a fixed bearer token and names no authorization server: pass it with --auth-token)"
    return " (the server wants a bearer token: pass it with --auth-token, or try --oauth if it signs in with OAuth)"


def _names_authorization_server(target: str, challenge_header: str | None) -> bool | None:
    """Ask the server's metadata (a few seconds at most; None when that fails)."""
    import httpx
    import trio

    from .oauth.discovery import names_authorization_server
    from .oauth.flow import auth_challenge

    async def ask() -> bool | None:
        with trio.move_on_after(10):
            async with httpx.AsyncClient(timeout=5, follow_redirects=False) as http:
                return await names_authorization_server(http, target, auth_challenge(challenge_header)[0])
        return None

    try:
        return trio.run(ask)
    except Exception:  # a hint is not worth a traceback
        return None


#: connection-level failures, where what the server printed explains most
_LINK_ERRORS = {"E101", "E102", "E104", "E105"}


def _last_line(stream: Any) -> str:
    if stream is None:
        return ""
    stream.seek(0)
    lines = [line.strip() for line in stream.read()[-8192:].decode(errors="replace").splitlines()]
    lines = [line for line in lines if line and not line.startswith("mcpkit: serving ")]
    return lines[-1][:300] if lines else ""


@click.command("discover")
@_target_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def discover_cmd(as_json: bool, **target: Any) -> None:
    """Show a server's era, protocol version, capabilities and identity."""

    async def work(client: Any) -> Any:
        return (await client.discover()).to_dict()

    info = _run(work, prefetch=False, **target)
    if info["era"] == "stateless" and target["mode"] == "auto" and not target["protocol_version"]:
        info["handshakeVersion"] = _handshake_version(target)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    server = info.get("serverInfo") or {}
    click.echo(f"server:    {server.get('name', '?')} {server.get('version', '')}".rstrip())
    click.echo(f"era:       {info['era']} ({'per-request _meta' if info['era'] == 'stateless' else 'initialize handshake'})")
    click.echo(f"version:   {info['protocolVersion']}")
    click.echo(f"transport: {info['transport']}")
    supported = [f"{v} (stateless)" if info["era"] == "stateless" else v for v in info.get("supportedVersions") or []]
    if info.get("handshakeVersion"):
        supported.append(f"{info['handshakeVersion']} (initialize handshake)")
    if supported:
        click.echo(f"supports:  {', '.join(supported)}")
    caps = info.get("capabilities") or {}
    click.echo("capabilities: " + (", ".join(_describe_cap(k, v) for k, v in caps.items()) or "none"))
    if info.get("instructions"):
        click.echo(f"instructions: {info['instructions']}")


def _handshake_version(target: dict[str, Any]) -> str | None:
    """The version a stateless-era server also accepts through the initialize handshake, if any
    (a second connection, pinned to the handshake era)."""
    import contextlib
    import io

    async def work(client: Any) -> Any:
        return (await client.discover()).protocol_version

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return _run(work, prefetch=False, **{**target, "mode": "handshake"})
    except SystemExit:
        return None


def _describe_cap(name: str, value: Any) -> str:
    flags = [k for k, v in value.items() if v is True] if isinstance(value, dict) else []
    return f"{name} ({', '.join(flags)})" if flags else name


@click.command("tools")
@_target_options
@click.option("--json", "as_json", is_flag=True, help="Print the raw tool list as JSON.")
def tools_cmd(as_json: bool, **target: Any) -> None:
    """List a server's tools."""

    async def work(client: Any) -> Any:
        return await client.list_tools()

    tools = _run(work, **target)
    if as_json:
        click.echo(json.dumps(tools, indent=2))
        return
    if not tools:
        click.echo("the server offers no tools")
        return
    width = shutil.get_terminal_size((100, 20)).columns
    rows = [(t["name"], _signature(t.get("inputSchema") or {}), _first_line(t.get("description"))) for t in tools]
    name_w = max(len("TOOL"), *(len(r[0]) for r in rows))  # names are never cut: they are typed
    args_w = max(len("ARGUMENTS"), min(max(len(r[1]) for r in rows), 40))
    click.echo(f"{'TOOL':<{name_w}}  {'ARGUMENTS':<{args_w}}  DESCRIPTION")
    for name, args, desc in rows:
        args = args if len(args) <= args_w else args[: args_w - 1] + "…"
        line = f"{name:<{name_w}}  {args:<{args_w}}  {desc}".rstrip()
        click.echo(line if len(line) <= width else line[: max(width - 1, name_w + 2)] + "…")


def _signature(schema: dict[str, Any]) -> str:
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = set(schema.get("required") or [])
    return " ".join(name if name in required else f"[{name}]" for name in props)


def _first_line(text: Any) -> str:
    return text.strip().splitlines()[0] if isinstance(text, str) and text.strip() else ""


@click.command("call")
@_target_options
@click.argument("tool", required=False)
@click.argument("pairs", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--args", "args_json", metavar="JSON", help="All arguments as one JSON object.")
@click.option("--json", "as_json", is_flag=True, help="Print the raw result as JSON.")
@click.option("--structured", is_flag=True, help="Print only the structured result (structuredContent) as JSON.")
@click.option("--progress/--no-progress", "show_progress", default=True, show_default=True,
              help="Show the tool's progress on stderr (a bar on a terminal, plain lines otherwise).")
@click.option("--task", "as_task", is_flag=True,
              help="Let the server answer with a task (the tasks extension): its id and status go to stderr, "
                   "the result to stdout when it ends.")
def call_cmd(tool: str, pairs: tuple[str, ...], args_json: str | None, as_json: bool, structured: bool,
             show_progress: bool, as_task: bool, **target: Any) -> None:
    """Call TOOL with KEY=VALUE arguments, converted by the tool's input schema
    (n=3 an integer, flag=true a boolean, JSON for objects and arrays)."""
    if target.get("target") and not target["target"].lower().startswith(("http://", "https://")) and target.get("stdio"):
        # `mcpkit call --stdio CMD TOOL k=v`: click took TOOL as TARGET; shift the arguments.
        pairs = (tool, *pairs) if tool is not None else pairs
        tool, target["target"] = target["target"], None
    if not tool:
        _fail("give the name of the tool to call")
    base: dict[str, Any] = {}
    if args_json is not None:
        try:
            base = json.loads(args_json)
        except ValueError as exc:
            _fail(f"--args is not valid JSON: {exc}")
        if not isinstance(base, dict):
            _fail("--args must be a JSON object")

    from ._progress import ProgressDisplay

    display = ProgressDisplay() if show_progress else None

    async def work(client: Any) -> Any:
        definition = await client.tool(tool)
        if definition is None and "tools" in client.description.capabilities:
            names = [t["name"] for t in await client.list_tools()]
            offered = ", ".join(names[:20]) + (", …" if len(names) > 20 else "") if names else "none"
            _fail(f"E203: unknown tool {tool!r}; the server's tools: {offered}")
        schema = (definition or {}).get("inputSchema") or {}
        arguments = dict(base)
        for pair in pairs:
            key, sep, raw = pair.partition("=")
            if not sep or not key:
                _fail(f"arguments are KEY=VALUE, got {pair!r}")
            arguments[key] = convert(raw, (schema.get("properties") or {}).get(key), key)
        try:
            if not as_task:
                return await client.call_tool(tool, arguments, progress=display)
            started = await client.start_tool(tool, arguments, progress=display)
            if not hasattr(started, "task_id"):
                return started  # the server answered at once
            where = target.get("target") or f"--stdio {shlex.quote(target.get('stdio') or '')}"
            click.echo(f"mcpkit: task {started.task_id} started (follow it with: mcpkit task get {where} {started.task_id})",
                       err=True)
            return await started.wait(on_status=StatusLines() if show_progress else None)
        finally:
            if display is not None:
                display.close()

    result = _run(work, **target, tasks=as_task)
    if as_json:
        click.echo(json.dumps(result.raw, indent=2))
    elif structured:
        if result.structured is None:
            _fail(f"tool {tool!r} returned no structured content (use --json to see the whole result)", 1)
        click.echo(json.dumps(result.structured, indent=2))
    else:
        for line in render_result(result):
            click.echo(line)
    sys.exit(1 if result.is_error else 0)


def render_result(result: Any) -> list[str]:
    """The result once: its content blocks, with a text block that only repeats the structured
    result shown as indented JSON; the structured result alone when there is no content."""
    out: list[str] = []
    pretty = json.dumps(result.structured, indent=2) if result.structured is not None else None
    for block in result.content:
        if pretty is not None and block.get("type") == "text" and _same_json(block.get("text"), result.structured):
            out.append(pretty)
            pretty = None
            continue
        out.append(render_block(block))
    if pretty is not None and not result.content:
        out.append(pretty)
    return out


def _same_json(text: Any, value: Any) -> bool:
    try:
        return isinstance(text, str) and json.loads(text) == value
    except ValueError:
        return False


def convert(raw: str, schema: Any, key: str) -> Any:
    """A command-line string as the value the property's schema asks for."""
    kinds = _kinds(schema)
    for kind in kinds or ["any"]:
        try:
            return _as(kind, raw)
        except ValueError:
            continue
    expected = " or ".join(kinds)
    _fail(f"argument {key!r}: {raw!r} is not {'an' if expected[:1] in 'aeiou' else 'a'} {expected}", 2)


def _kinds(schema: Any) -> list[str]:
    if not isinstance(schema, dict):
        return []
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    out: list[str] = []
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or []:
            out.extend(k for k in _kinds(option) if k not in out)
    return out


def _as(kind: str, raw: str) -> Any:
    if kind == "string":
        return raw
    if kind == "integer":
        return int(raw)
    if kind == "number":
        value = float(raw)
        return int(value) if value.is_integer() and "." not in raw and "e" not in raw.lower() else value
    if kind == "boolean":
        lowered = raw.lower()
        if lowered in ("true", "yes", "1", "on"):
            return True
        if lowered in ("false", "no", "0", "off"):
            return False
        raise ValueError(raw)
    if kind == "null":
        if raw.lower() in ("null", "none", ""):
            return None
        raise ValueError(raw)
    if kind in ("object", "array"):
        value = json.loads(raw)
        if (kind == "object") != isinstance(value, dict) or (kind == "array") != isinstance(value, list):
            raise ValueError(raw)
        return value
    try:  # no schema: JSON when it parses, else the plain string
        return json.loads(raw)
    except ValueError:
        return raw


def render_block(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        size = len(block.get("data", "")) * 3 // 4
        return f"[{kind} {block.get('mimeType', '?')}, about {size} bytes]"
    if kind == "resource_link":
        return f"[resource link] {block.get('uri', '')}" + (f" ({block['name']})" if block.get("name") else "")
    if kind == "resource":
        res = block.get("resource") or {}
        if "text" in res:
            return str(res["text"])
        return f"[resource {res.get('uri', '')}, {res.get('mimeType', 'binary')}]"
    return json.dumps(block)


class StatusLines:
    """Task status on stderr, one line each time it changes."""

    def __init__(self) -> None:
        self.last: tuple[Any, Any] = (None, None)

    def __call__(self, state: dict[str, Any]) -> None:
        now = (state.get("status"), state.get("statusMessage"))
        if now != self.last:
            self.last = now
            click.echo(f"task: {now[0]}" + (f"  {now[1]}" if now[1] else ""), err=True)


@click.group("task")
def task_group() -> None:
    """Look at or cancel a task a server runs (the tasks extension)."""


@task_group.command("get")
@_target_options
@click.argument("task_id", required=False)
@click.option("--wait", is_flag=True, help="Wait for the task to end and print its result (answering what it asks).")
def task_get_cmd(task_id: str | None, wait: bool, **target: Any) -> None:
    """Print the state of task TASK_ID (JSON), or with --wait its result."""
    task_id = _task_id(task_id, target)

    async def work(client: Any) -> Any:
        handle = client.task(task_id)
        return await handle.wait(on_status=StatusLines()) if wait else await handle.refresh()

    result = _run(work, **target, prefetch=False, tasks=True)
    if wait:
        for line in render_result(result):
            click.echo(line)
        sys.exit(1 if result.is_error else 0)
    click.echo(json.dumps(result, indent=2))


@task_group.command("cancel")
@_target_options
@click.argument("task_id", required=False)
def task_cancel_cmd(task_id: str | None, **target: Any) -> None:
    """Ask the server to cancel task TASK_ID."""
    task_id = _task_id(task_id, target)

    async def work(client: Any) -> Any:
        await client.task(task_id).cancel()

    _run(work, **target, prefetch=False, tasks=True)
    click.echo(f"cancel requested for task {task_id}", err=True)


def _task_id(task_id: str | None, target: dict[str, Any]) -> str:
    """With --stdio there is no TARGET: click took the task id for it."""
    if task_id is None and target.get("stdio") and target.get("target"):
        task_id, target["target"] = target["target"], None
    if not task_id:
        _fail("give the task id")
    return task_id


COMMANDS = [tools_cmd, call_cmd, discover_cmd, task_group, logout_cmd]

"""Server settings: defaults, then the config file's [server] table, then MCPKIT_* variables."""

from __future__ import annotations

import difflib
import os
import re
import typing
from typing import Any, Literal

import msgspec
import msgspec.structs

from .auth import AuthSettings


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
    #: largest JSON-RPC message accepted: one stdio line, or one HTTP request body (bytes)
    max_message_bytes: int = 4 * 1024 * 1024
    #: requests one connection (stdio process, HTTP session, SSE stream) may have running at
    #: once; more are refused with -32000 until some finish
    max_concurrent_requests: int = 1000
    #: worker threads each plain-``def`` tool (resource, prompt) may hold; a stuck one can
    #: only take its own slots. A tool's ``@mcpkit.tool(max_threads=N)`` overrides it.
    max_threads_per_tool: int = 8
    #: log level of the server's own log (stderr)
    log_level: Literal["debug", "info", "warning", "error"] = "warning"
    # -- HTTP transports --
    host: str = "127.0.0.1"
    port: int = 8000
    #: extra allowed Origin values ("*" allows any); loopback origins are always allowed
    allow_origins: list[str] = []
    #: bearer token required on every HTTP request but /healthz and preflights (development;
    #: the same as [server.auth] verifier = "static" with this token)
    auth_token: str | None = None
    #: OAuth 2.1 resource server: token verification, scopes, Protected Resource Metadata
    auth: AuthSettings = msgspec.field(default_factory=AuthSettings)
    #: idle handshake-era sessions expire after this many seconds
    session_ttl_s: float = 1800.0
    #: handshake-era sessions one process keeps; past it the idlest one without a request or
    #: stream in progress is evicted (503, -32010, when every one is busy). Above
    #: max_connections, so open GET streams (one connection each) cannot take them all.
    max_sessions: int = 4096
    #: SSE events kept per session for Last-Event-ID replay, at most this many and bytes (a
    #: bigger message is not kept); all sessions' replay stores together at most total bytes
    event_store_size: int = 1000
    event_store_bytes: int = 1024 * 1024
    event_store_total_bytes: int = 256 * 1024 * 1024
    #: keep-alive comment interval on long-lived SSE streams, seconds
    sse_heartbeat_s: float = 15.0
    #: bytes of messages one SSE stream may have waiting to be written; a client that lets
    #: more pile up (it does not read) loses that stream (resumable ones can be resumed)
    sse_backlog_bytes: int = 8 * 1024 * 1024
    #: retry hint (ms) sent on 2025-11-25 SSE streams
    sse_retry_ms: int = 1000
    #: "auto": JSON unless the request streams; "sse" or "json" always
    response_mode: Literal["auto", "sse", "json"] = "auto"
    #: seconds in-flight work may finish after SIGTERM before it is cancelled
    shutdown_grace_s: float = 5.0
    workers: int = 1
    #: count requests, sessions, streams and refusals, and serve them as Prometheus text on
    #: GET /metrics (HTTP transports; docs/observability.md)
    metrics: bool = False
    #: /metrics answers loopback clients; others must send ``Authorization: Bearer <this>``
    metrics_token: str | None = None
    #: the folder where the workers of one deployment share their metrics (``--workers`` makes
    #: one itself; set it to add up several ``mcpkit serve`` processes on one host)
    metrics_dir: str | None = None
    #: one line per HTTP request on stderr (client, method, path, status, duration, request id)
    access_log: bool = True
    #: "mcpkit" (our own HTTP/1.1 server) or "hypercorn" (HTTP/2 too)
    http_server: Literal["mcpkit", "hypercorn"] = "mcpkit"
    #: serve HTTPS with this certificate chain (PEM) and key
    certfile: str | None = None
    keyfile: str | None = None
    #: a request head must be complete this many seconds after it (or the connection) began
    header_timeout_s: float = 10.0
    #: longest pause inside a request body; the whole body must also arrive within this plus
    #: one second per min_body_bytes_per_s bytes (0: no overall deadline)
    body_timeout_s: float = 30.0
    min_body_bytes_per_s: int = 1024
    #: idle keep-alive connections are closed after this many seconds
    keepalive_timeout_s: float = 75.0
    #: a client that takes no byte of a response (or acknowledges none: it vanished) for this
    #: long is disconnected
    send_timeout_s: float = 30.0
    #: open connections at most; at the cap a new one takes the place of the connection that
    #: has waited longest without a request in progress (idle, or slow with its head or body);
    #: when there is none it is answered 503 and closed
    max_connections: int = 2048
    #: requests answered at once per process by mcpkit's server, the rest waiting in arrival
    #: order (0: no cap); one answered for active_request_hold_s stops counting (long streams,
    #: slow upstreams). Under saturation this keeps a request that awaits I/O from waiting many
    #: times as long as cheap requests that overtake it, at ~10 % more CPU per request
    #: (docs/benchmarks.md, I/O-bound tools); off until measured on a quiet machine.
    active_requests: int = 0
    active_request_hold_s: float = 0.05
    max_url_bytes: int = 8192
    #: request line and header fields together (431 past it)
    max_header_bytes: int = 32768
    max_headers: int = 100
    #: tool behind POST /mcp/search (the REST search endpoint)
    search_tool: str = "search_code"
    # -- the browser console (docs/console.md) --
    #: serve /console: plugins, tools and their schemas, live calls, try-it forms (off: 404)
    console: bool = False
    #: the operator token that opens the console to clients outside console_trusted (a bearer
    #: header, or typed once into the page); never an MCP token
    console_token: str | None = None
    #: peer addresses (by the socket, never the Host header) that use the console without the token
    console_trusted: list[str] = msgspec.field(default_factory=lambda: ["127.0.0.0/8", "::1/128"])
    # -- telemetry (docs/observability.md) --
    #: a span per request over OTLP/HTTP, configured by the standard OTEL_* variables (the otel extra)
    traces: bool = False
    # -- state shared by several processes (docs/deploy.md) --
    #: "memory" (each process its own), or "redis://host:6379/0" / "rediss://..." (shared:
    #: sessions, their replay streams, notifications, tasks, the requestState secret)
    state: str = "memory"
    #: prefix of every Redis key and channel (several deployments can share one Redis)
    state_prefix: str = "mcpkit"
    #: seconds a request may wait for Redis in all (every command gets what is left) before it gets 503
    state_timeout_s: float = 2.0
    # -- tasks (the io.modelcontextprotocol/tasks extension) --
    #: "sqlite" (durable, <data dir>/tasks.sqlite3, or task_store_path) or "memory"
    task_store: Literal["sqlite", "memory"] = "sqlite"
    task_store_path: str | None = None
    #: a task-capable tool still running after this long answers with a task (0: at once)
    task_escalate_ms: int = 100
    #: how long a task (and its result) is kept after it was created; null keeps it for ever
    task_ttl_ms: int | None = 3_600_000
    #: how often clients are asked to poll tasks/get
    task_poll_interval_ms: int = 1000
    #: live (not terminal) tasks at most, per principal and in all
    max_tasks_per_principal: int = 100
    max_live_tasks: int = 1000


_ENV_PREFIX = "MCPKIT_"
_AUTH_ENV_PREFIX = "MCPKIT_AUTH__"
_LISTS = {"allow_origins", "console_trusted"}
#: earlier names still read: old name -> current name
_RENAMED = {"max_body_bytes": "max_message_bytes"}


def setting_variables() -> set[str]:
    """Every ``MCPKIT_<SETTING>`` and ``MCPKIT_AUTH__<SETTING>`` variable :func:`load_settings` reads."""
    names = {_ENV_PREFIX + f.upper() for f in (*Settings.__struct_fields__, *_RENAMED) if f != "auth"}
    return names | {_AUTH_ENV_PREFIX + f.upper() for f in AuthSettings.__struct_fields__}


def load_settings(table: dict[str, Any] | None, environ: dict[str, str] | None = None,
                  overrides: dict[str, Any] | None = None, *, table_name: str = "[server]") -> Settings:
    """Settings from a [server] table, then ``MCPKIT_<FIELD>`` variables, then ``overrides``
    (the command line). A bad value is reported with the place it came from: the variable, the
    table key or the command-line option."""
    env = os.environ if environ is None else environ
    data = dict(table or {})
    source = {key: f"{table_name} {key}" for key in data}
    for fname in (*Settings.__struct_fields__, *_RENAMED):
        if fname == "auth":
            continue
        var = _ENV_PREFIX + fname.upper()
        value = env.get(var)
        if value is not None:
            data[fname] = [v.strip() for v in value.split(",") if v.strip()] if fname in _LISTS else value
            source[fname] = f"{var}={value}"
    auth = _auth_from_env(env)
    if auth:
        table_auth = data.get("auth")
        data["auth"] = {**(table_auth if isinstance(table_auth, dict) else {}), **auth}
        source["auth"] = "MCPKIT_AUTH__* variables"
    for key, value in (overrides or {}).items():
        if key == "auth" and isinstance(value, dict) and isinstance(data.get("auth"), dict):
            value = {**data["auth"], **value}
        data[key] = value
        source[key] = f"--{key.replace('_', '-')} {value}"
    for old, new in _RENAMED.items():
        if old in data:
            value = data.pop(old)
            if new not in data:
                data[new] = value
                source[new] = source.get(old, new)
    unknown = sorted(set(data) - set(Settings.__struct_fields__))
    if unknown:
        raise ValueError(f"unknown server setting {_unknown(unknown[0], table_name)}")
    try:
        return msgspec.convert(data, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise ValueError(_explain(exc, source)) from None


def _unknown(key: str, table_name: str) -> str:
    close = difflib.get_close_matches(key, Settings.__struct_fields__, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(Settings.__struct_fields__)}"
    return f"{key!r} in {table_name}{hint}"


_TYPE_WORDS = {"float": "a number", "int": "an integer", "bool": "true or false", "str": "a string"}


def _explain(exc: msgspec.ValidationError, source: dict[str, str]) -> str:
    """``Expected `float`, got `str` - at `$.default_timeout``` -> the variable and the rule."""
    text = str(exc)
    message, _, where = text.partition(" - at `$.")
    path = [part.split("[")[0] for part in where.rstrip("`").split(".")]
    field = path[0]
    for name, words in _TYPE_WORDS.items():
        message = message.replace(f"Expected `{name}`", f"expected {words}")
    message = re.sub(r", got `[^`]*`$", "", message)
    struct = _struct_at(path)
    enum = re.fullmatch(r"Invalid enum value (.*)", message)
    if enum and struct is not None:
        message = f"{enum[1]} is not one of: {', '.join(_choices(struct, path[-1]))}"
    unknown = re.fullmatch(r"Object contains unknown field `(.*)`", message)
    if unknown and struct is not None:
        close = difflib.get_close_matches(unknown[1], _field_types(struct), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(_field_types(struct))}"
        message = f"unknown key {unknown[1]!r}; {hint}"
    if field in source:
        return f"invalid server setting {source[field]}: {message[:1].lower()}{message[1:]}"
    return f"invalid server setting: {text}"


def _field_types(struct: type[msgspec.Struct]) -> dict[str, Any]:
    return {f.name: f.type for f in msgspec.structs.fields(struct)}


def _struct_at(path: list[str]) -> type[msgspec.Struct] | None:
    """The settings struct that holds the last field of ``path`` (``Settings`` or ``AuthSettings``),
    or, for an unknown-field error (the path names the struct itself), that struct."""
    struct: Any = Settings
    for name in path[:-1]:
        struct = _field_types(struct).get(name)
        if not (isinstance(struct, type) and issubclass(struct, msgspec.Struct)):
            return None
    last = _field_types(struct).get(path[-1])
    if isinstance(last, type) and issubclass(last, msgspec.Struct):
        return last
    return struct


def _choices(struct: type[msgspec.Struct], name: str) -> list[str]:
    """The values a ``Literal[...]`` field (``X | None`` included) accepts."""
    hint = _field_types(struct).get(name)
    args = typing.get_args(hint)
    if typing.get_origin(hint) is not Literal:
        args = tuple(v for a in args if typing.get_origin(a) is Literal for v in typing.get_args(a))
    return [str(v) for v in args]


def _auth_from_env(env: dict[str, str] | os._Environ[str]) -> dict[str, Any]:
    """``MCPKIT_AUTH__<FIELD>`` variables: lists comma-separated, ``scope_implies`` as JSON."""
    out: dict[str, Any] = {}
    for fname, ftype in zip(AuthSettings.__struct_fields__, msgspec.structs.fields(AuthSettings)):
        value = env.get(_AUTH_ENV_PREFIX + fname.upper())
        if value is None:
            continue
        if fname == "scope_implies":
            try:
                out[fname] = msgspec.json.decode(value)
            except msgspec.DecodeError:
                raise ValueError(f"{_AUTH_ENV_PREFIX}SCOPE_IMPLIES must be a JSON object") from None
        elif "list[" in str(ftype.type):
            out[fname] = [v.strip() for v in value.replace(" ", ",").split(",") if v.strip()]
        else:
            out[fname] = value
    return out

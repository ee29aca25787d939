"""What an ``[upstreams.NAME]`` table (or ``--upstream NAME=URL``) says, checked once at start-up.

    [upstreams.files]                       # a stdio server: mcpkit starts and owns the process
    command = ["node", "server.js", "/srv/data"]
    env = { LOG_LEVEL = "warn" }
    [upstreams.docs]                        # a URL: Streamable HTTP (either era) or legacy SSE
    url = "http://127.0.0.1:9000/mcp"
    headers = { Authorization = "Bearer ${DOCS_TOKEN}" }

Values of ``env``, ``headers`` and the OAuth secrets may name environment variables as
``${NAME}`` (or ``${NAME:-default}``); a variable that is not set stops the start with its name
(never a value). Secrets are never logged: :meth:`UpstreamSettings.describe` shows neither.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Iterable

#: keys an [upstreams.NAME] table may have
KEYS = frozenset({
    "command", "url", "env", "cwd", "headers", "prefix", "rename", "tools", "exclude_tools", "scopes",
    "timeout", "task", "protocol", "connect_timeout", "max_message_bytes", "stderr", "oauth",
    "backoff", "max_backoff", "max_attempts",
})
OAUTH_KEYS = frozenset({"grant", "client_id", "client_secret", "scopes", "token_file"})
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
PROTOCOLS = ("auto", "stateless", "handshake")


class UpstreamConfigError(ValueError):
    """An [upstreams.NAME] table that cannot work (one line naming the key)."""


def expand(value: str, where: str, environ: dict[str, str] | None = None) -> str:
    """``${VAR}`` and ``${VAR:-default}`` replaced from the environment."""
    env = os.environ if environ is None else environ

    def one(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise UpstreamConfigError(f"{where} names the environment variable {name}, which is not set")

    return _VAR.sub(one, value)


@dataclass
class OAuthSettings:
    grant: str = "client_credentials"  # or "stored": a sign-in kept by `mcpkit login`-style flows
    client_id: str | None = None
    client_secret: str | None = None
    scopes: list[str] | None = None
    token_file: str | None = None


@dataclass
class UpstreamSettings:
    name: str
    command: list[str] | None = None
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    prefix: str = ""
    rename: dict[str, str] = field(default_factory=dict)
    tools: list[str] | None = None
    exclude_tools: list[str] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)
    timeout: float | None = None
    task: str | None = None
    protocol: str = "auto"
    connect_timeout: float = 10.0
    max_message_bytes: int = 4 * 1024 * 1024
    stderr: str = "inherit"
    oauth: OAuthSettings | None = None
    backoff: float = 0.5
    max_backoff: float = 30.0
    max_attempts: int = 0  # 0: retry for ever

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"

    def target(self) -> str | list[str]:
        return list(self.command) if self.command else str(self.url)

    def describe(self) -> str:
        """What the upstream is, for logs and reports: no header, variable or secret."""
        if self.command:
            return f"stdio `{shlex.join(self.command)}`"
        return f"url {self.url}"

    def wants(self, tool: str) -> bool:
        """Does the tools / exclude_tools filter let the upstream's tool ``tool`` through?"""
        if self.tools is not None and tool not in self.tools:
            return False
        return tool not in self.exclude_tools


def parse_upstream(name: str, table: Any, *, environ: dict[str, str] | None = None) -> UpstreamSettings:
    """One [upstreams.NAME] table, checked; UpstreamConfigError names what is wrong."""
    where = f"[upstreams.{name}]"
    if not _NAME.match(name):
        raise UpstreamConfigError(f"{where}: the name must be 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit")
    if not isinstance(table, dict):
        raise UpstreamConfigError(f"{where} must be a table")
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise UpstreamConfigError(f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(KEYS))})")
    s = UpstreamSettings(name=name, prefix=name)
    command, url = table.get("command"), table.get("url")
    if (command is None) == (url is None):
        raise UpstreamConfigError(f"{where} needs exactly one of command (a stdio server) or url (an HTTP server)")
    if command is not None:
        argv = shlex.split(command) if isinstance(command, str) else command
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and a for a in argv):
            raise UpstreamConfigError(f"{where}: command must be a non-empty list of strings (or one string)")
        s.command = list(argv)
    else:
        if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
            raise UpstreamConfigError(f"{where}: url must be an http:// or https:// URL, got {url!r}")
        s.url = url
    s.env = {k: expand(v, f"{where} env.{k}", environ) for k, v in _strings(table, "env", where).items()}
    s.headers = {k: expand(v, f"{where} headers.{k}", environ) for k, v in _strings(table, "headers", where).items()}
    if s.command is None and (s.env or "cwd" in table):
        raise UpstreamConfigError(f"{where}: env and cwd are for stdio servers (command); this one has a url")
    if s.url is None and s.headers:
        raise UpstreamConfigError(f"{where}: headers are for HTTP servers (url); this one has a command")
    s.cwd = _optional_str(table, "cwd", where)
    prefix = table.get("prefix", name)
    if not isinstance(prefix, str):
        raise UpstreamConfigError(f"{where}: prefix must be a string (\"\" serves the names as they are)")
    s.prefix = prefix
    s.rename = _strings(table, "rename", where)
    if "tools" in table:
        s.tools = _string_list(table, "tools", where)
    s.exclude_tools = _string_list(table, "exclude_tools", where)
    s.scopes = _string_list(table, "scopes", where)
    s.timeout = _number(table, "timeout", where, None)
    s.connect_timeout = _number(table, "connect_timeout", where, s.connect_timeout) or s.connect_timeout
    s.backoff = _number(table, "backoff", where, s.backoff) or s.backoff
    s.max_backoff = max(s.backoff, _number(table, "max_backoff", where, s.max_backoff) or s.max_backoff)
    attempts = table.get("max_attempts", 0)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0:
        raise UpstreamConfigError(f"{where}: max_attempts must be a whole number >= 0 (0: retry for ever)")
    s.max_attempts = attempts
    size = table.get("max_message_bytes", s.max_message_bytes)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1024:
        raise UpstreamConfigError(f"{where}: max_message_bytes must be a whole number of bytes >= 1024")
    s.max_message_bytes = size
    task = table.get("task")
    if task not in (None, "optional"):
        raise UpstreamConfigError(f"{where}: task must be \"optional\" (forwarded tools may run as mcpkit tasks), got {task!r}")
    s.task = task
    protocol = table.get("protocol", "auto")
    from ..protocol.versions import ALL_VERSIONS

    if protocol not in PROTOCOLS and protocol not in ALL_VERSIONS:
        raise UpstreamConfigError(f"{where}: protocol must be one of {', '.join(PROTOCOLS + ALL_VERSIONS)}, got {protocol!r}")
    s.protocol = protocol
    stderr = table.get("stderr", "inherit")
    if not isinstance(stderr, str) or not stderr:
        raise UpstreamConfigError(f"{where}: stderr must be \"inherit\", \"discard\" or a file path")
    s.stderr = stderr
    if "oauth" in table:
        if s.url is None:
            raise UpstreamConfigError(f"{where}: oauth is for HTTP servers (url)")
        s.oauth = _oauth(table["oauth"], f"{where} oauth", environ)
    return s


def _oauth(table: Any, where: str, environ: dict[str, str] | None) -> OAuthSettings:
    if not isinstance(table, dict):
        raise UpstreamConfigError(f"{where} must be a table")
    unknown = sorted(set(table) - OAUTH_KEYS)
    if unknown:
        raise UpstreamConfigError(f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(OAUTH_KEYS))})")
    grant = table.get("grant", "client_credentials")
    if grant not in ("client_credentials", "stored"):
        raise UpstreamConfigError(f"{where}: grant must be \"client_credentials\" or \"stored\", got {grant!r}")
    out = OAuthSettings(grant=grant)
    for key in ("client_id", "client_secret", "token_file"):
        value = _optional_str(table, key, where)
        setattr(out, key, expand(value, f"{where}.{key}", environ) if value is not None else None)
    if "scopes" in table:
        out.scopes = _string_list(table, "scopes", where)
    if grant == "client_credentials" and not (out.client_id and out.client_secret):
        raise UpstreamConfigError(f"{where}: the client_credentials grant needs client_id and client_secret")
    return out


def parse_cli_upstream(spec: str) -> tuple[str, dict[str, Any]]:
    """``NAME=URL`` from the command line (a URL only: commands go in the config file)."""
    name, sep, url = spec.partition("=")
    if not sep or not name or not url:
        raise UpstreamConfigError(f"--upstream {spec!r}: the form is NAME=URL, e.g. --upstream docs=http://127.0.0.1:9000/mcp")
    if not url.lower().startswith(("http://", "https://")):
        raise UpstreamConfigError(f"--upstream {spec!r}: only URLs go on the command line; put a command in the config "
                                  f"file as [upstreams.{name}] command = [...]")
    return name.strip(), {"url": url.strip()}


def upstream_tables(file_tables: dict[str, Any], cli: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The file's [upstreams.*] with the command line's --upstream added (a name given on both:
    the command line's URL replaces the file's target, the file's other keys stay)."""
    out = {name: dict(table) if isinstance(table, dict) else table for name, table in file_tables.items()}
    for spec in cli:
        name, table = parse_cli_upstream(spec)
        base = out.get(name) if isinstance(out.get(name), dict) else {}
        base = {k: v for k, v in base.items() if k not in ("command", "url", "env", "cwd")}
        out[name] = {**base, **table}
    return out


def _strings(table: dict[str, Any], key: str, where: str) -> dict[str, str]:
    value = table.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise UpstreamConfigError(f"{where}: {key} must be a table of strings")
    return dict(value)


def _string_list(table: dict[str, Any], key: str, where: str) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UpstreamConfigError(f"{where}: {key} must be a list of strings")
    return list(value)


def _optional_str(table: dict[str, Any], key: str, where: str) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise UpstreamConfigError(f"{where}: {key} must be a string")
    return value


def _number(table: dict[str, Any], key: str, where: str, default: float | None) -> float | None:
    value = table.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise UpstreamConfigError(f"{where}: {key} must be a positive number of seconds")
    return float(value)

"""Structured invocation logging: one line per tool call, resource read and prompt.

Each line carries what an operator asks of a search tool's traffic: which tool (and plugin),
how big the arguments were, how many results came back, how long it took, and how it ended.
A middleware plugin built on the public API only (``mcpkit.middleware``).

    [plugins.invocation_log]
    enabled = "auto"    # "auto": when the server's log level is info or debug; true; false
    format = "text"     # or "json": one JSON object per line
    file = "/var/log/mcpkit/invocations.log"   # default: stderr (a file turns logging on)
    arguments = "size"  # "size" (bytes only), "names", or "values" (with secrets redacted)
    redact = ["password", "token", "secret", "api_key", "authorization"]
    methods = ["tools/call", "resources/read", "prompts/get"]
"""

from __future__ import annotations

import datetime
import logging
import sys
import time
from typing import Any, Awaitable, Callable

import msgspec

import mcpkit

LOGGER = "mcpkit.invocations"
_HANDLER_MARK = "_mcpkit_invocation_log"
_DEFAULT_METHODS = ["tools/call", "resources/read", "prompts/get"]
_DEFAULT_REDACT = ["password", "token", "secret", "api_key", "authorization"]


class Options(msgspec.Struct):
    enabled: bool | str = "auto"
    format: str = "text"
    file: str | None = None
    arguments: str = "size"
    redact: list[str] = msgspec.field(default_factory=lambda: list(_DEFAULT_REDACT))
    methods: list[str] = msgspec.field(default_factory=lambda: list(_DEFAULT_METHODS))

    def __post_init__(self) -> None:
        if self.enabled not in (True, False, "auto"):
            raise ValueError(f"enabled must be true, false or \"auto\", got {self.enabled!r}")
        if self.format not in ("text", "json"):
            raise ValueError(f"format must be \"text\" or \"json\", got {self.format!r}")
        if self.arguments not in ("size", "names", "values"):
            raise ValueError(f"arguments must be \"size\", \"names\" or \"values\", got {self.arguments!r}")


_KEYS = frozenset(Options.__struct_fields__)


def options(config: dict[str, Any]) -> Options:
    unknown = sorted(set(config) - _KEYS)
    if unknown:
        raise ValueError(f"unknown setting {unknown[0]!r} (known: {', '.join(sorted(_KEYS))})")
    try:
        return msgspec.convert(config, Options, strict=False)
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from None


class InvocationLog:
    """The middleware: times the call, counts what came back, writes one line."""

    def __init__(self, opts: Options, logger: logging.Logger) -> None:
        self.opts = opts
        self.logger = logger
        self.redact = {k.lower() for k in opts.redact}

    async def __call__(self, call: mcpkit.Call, call_next: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        start = time.perf_counter()
        outcome, error, result = "cancelled", None, None
        try:
            result = await call_next()
            outcome = "error" if result.get("isError") else "ok"
            return result
        except Exception as exc:
            outcome, error = "failed", str(exc) or type(exc).__name__
            raise
        finally:
            self.logger.info(self.render(self.record(call, result, outcome, error, time.perf_counter() - start)))

    def record(self, call: mcpkit.Call, result: dict[str, Any] | None, outcome: str, error: str | None,
               seconds: float) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "ts": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds"),
            "method": call.method,
        }
        key = {"tools/call": "tool", "prompts/get": "prompt", "resources/read": "uri"}.get(call.method, "target")
        if call.target is not None:
            rec[key] = call.target
        rec["plugin"] = call.plugin
        rec["request_id"] = call.request_id
        client = call.client_info or {}
        rec["client"] = " ".join(str(client[k]) for k in ("name", "version") if client.get(k)) or None
        if call.arguments is not None:
            rec["arguments_bytes"] = len(msgspec.json.encode(call.arguments))
            if self.opts.arguments == "names":
                rec["argument_names"] = sorted(call.arguments)
            elif self.opts.arguments == "values":
                rec["arguments"] = self._redacted(call.arguments)
        rec["results"] = result_count(call.method, result) if result is not None else None
        rec["outcome"] = outcome
        if error is not None:
            rec["error"] = error[:300]
        elif outcome == "error" and result is not None:
            rec["error"] = _first_text(result)[:300]
        rec["latency_ms"] = round(seconds * 1000, 2)
        return rec

    def _redacted(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: "[redacted]" if str(k).lower() in self.redact else self._redacted(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._redacted(v) for v in value]
        return value

    def render(self, rec: dict[str, Any]) -> str:
        if self.opts.format == "json":
            return msgspec.json.encode(rec).decode()
        parts = []
        for key, value in rec.items():
            if key == "ts" or value is None:
                continue
            text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
            if isinstance(value, str) and (not value or any(c in value for c in ' ="')):
                text = msgspec.json.encode(value).decode()
            parts.append(f"{key}={text}")
        return " ".join(parts)


def result_count(method: str, result: dict[str, Any]) -> int:
    """How many results came back: the items of a structured result's list (a search's hits),
    else the content blocks; the contents of a read; the messages of a prompt."""
    if method == "resources/read":
        return len(result.get("contents") or [])
    if method == "prompts/get":
        return len(result.get("messages") or [])
    structured = result.get("structuredContent")
    if isinstance(structured, list):
        return len(structured)
    if isinstance(structured, dict):
        for value in structured.values():
            if isinstance(value, list):
                return len(value)
    return len(result.get("content") or [])


def _first_text(result: dict[str, Any]) -> str:
    for block in result.get("content") or []:
        text = getattr(block, "text", None) if not isinstance(block, dict) else block.get("text")
        if isinstance(text, str):
            return text
    return ""


def _logger(opts: Options) -> logging.Logger:
    """The ``mcpkit.invocations`` logger, writing where the options say.

    Text to stderr goes through the server's own log (its format, its level, unless enabled
    explicitly). JSON, or a file, gets a handler of its own that writes bare lines."""
    logger = logging.getLogger(LOGGER)
    for handler in [h for h in logger.handlers if getattr(h, _HANDLER_MARK, False)]:
        logger.removeHandler(handler)
        handler.close()
    logger.propagate = True
    if opts.enabled is True or opts.file:
        logger.setLevel(logging.INFO)
    if opts.format == "json" or opts.file:
        handler: logging.Handler = logging.FileHandler(opts.file, encoding="utf-8") if opts.file \
            else logging.StreamHandler(sys.stderr)
        fmt = "%(message)s" if opts.format == "json" else "%(asctime)s %(message)s"
        handler.setFormatter(logging.Formatter(fmt))
        setattr(handler, _HANDLER_MARK, True)
        logger.addHandler(handler)
        logger.propagate = False
    return logger


@mcpkit.hookimpl
def mcpkit_middleware(config: dict[str, Any]) -> list[Any]:
    opts = options(config)
    if opts.enabled is False:
        return []
    logger = _logger(opts)
    if not logger.isEnabledFor(logging.INFO):
        return []  # "auto" below info: no middleware at all, no cost per call
    return [mcpkit.middleware(InvocationLog(opts, logger), name="invocation_log", order=-100,
                              methods=opts.methods)]

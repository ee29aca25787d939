"""What the console lists (plugins, tools, resources, prompts, upstreams) and its try-it call.

A try-it call is a real ``tools/call``: a stateless-era request fed to the ``/mcp`` endpoint's
own session core and runner, in this process, as the console's principal. So everything a
client's call meets applies to it: the session core's limits, the middleware, argument checks,
timeouts, the thread slots, scopes, observers (it shows among the calls in flight, with the
client name ``mcpkit-console``). Only the HTTP exchange is left out.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import msgspec

from ...._version import __version__
from ....protocol import http_rules, jsonrpc
from ....protocol.jsonrpc import Answer
from ....protocol.session import Run
from ....protocol.types import META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION
from ....protocol.versions import STATELESS_VERSIONS
from ....server.app import App
from ....server.auth import Principal

log = logging.getLogger("mcpkit.console")
CLIENT_NAME = "mcpkit-console"
#: notifications (progress, log messages) one try-it call keeps for the page
MAX_MESSAGES = 50
#: the principal try-it calls run as on a server that authorizes requests: the operator
CONSOLE_PRINCIPAL = Principal("console", issuer="mcpkit:console", all_scopes=True)
_ids = itertools.count(1)


def _status(info: Any) -> dict[str, Any] | None:
    if info.status is None:
        return None
    try:
        return info.status()
    except Exception as exc:  # a status that fails is itself the state to show
        return {"state": "unknown", "error": f"{type(exc).__name__}: {exc}"}


def catalog(app: App) -> dict[str, Any]:
    """Every plugin with its problems, and every tool, resource and prompt with its schema."""
    reg = app.registry
    plugins = [{
        "name": p.name, "distribution": p.distribution, "version": p.version, "loaded": p.loaded,
        "error": p.error, "warnings": p.warnings, "conflicts": p.conflicts, "path": p.path,
        "status": _status(p), "items": reg.items_of(p.name),
    } for p in app.plugins]
    tools = [{**t.describe(titles=True, annotations=True, structured=True), "plugin": reg.owner.get(("tool", name)),
              "task": bool(t.task)} for name, t in reg.tools.items()]
    resources = [{**r.describe(titles=True), "plugin": reg.owner.get(("resource", r.uri))}
                 for r in (*reg.resources, *reg.templates)]
    prompts = [{**p.describe(titles=True), "plugin": reg.owner.get(("prompt", name))} for name, p in reg.prompts.items()]
    return {"server": app.server_info, "plugins": plugins, "tools": tools, "resources": resources, "prompts": prompts,
            "upstreams": catalog_upstreams(app)}


def catalog_upstreams(app: App) -> dict[str, Any]:
    """The live state of each plugin that reports one (the gateway's upstreams)."""
    return {p.name: s for p in app.plugins if p.loaded and (s := _status(p)) is not None}


class _Capture:
    """The try-it call's channel: keeps what the tool sends and its answer."""

    can_ask = False  # as for any stateless request: no server-to-client requests

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.answer_: Answer | None = None

    async def message(self, data: bytes) -> None:
        if len(self.messages) < MAX_MESSAGES:
            self.messages.append(msgspec.json.decode(data))

    async def answer(self, answer: Answer) -> None:
        self.answer_ = answer

    def done(self) -> None:
        pass


def request(app: App, tool: str, arguments: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    """The body and headers a stateless-era client would POST to ``/mcp`` for this call."""
    version = STATELESS_VERSIONS[-1]
    meta = {META_PROTOCOL_VERSION: version, META_CLIENT_INFO: {"name": CLIENT_NAME, "version": __version__},
            META_CLIENT_CAPABILITIES: {}}
    params = {"name": tool, "arguments": arguments, "_meta": meta}
    body = msgspec.json.encode({"jsonrpc": "2.0", "id": f"console-{next(_ids)}", "method": "tools/call", "params": params})
    item = app.registry.tools.get(tool)
    try:
        mirrored = http_rules.mirrored_paths(item.input_schema) if item is not None else {}
    except ValueError:
        mirrored = {}  # the tool's annotation is broken: its call says so
    headers = {k.lower(): v for k, v in http_rules.request_headers("tools/call", params, mirrored).items()}
    headers["mcp-protocol-version"] = version
    return body, headers


async def call_tool(app: App, streamable: Any, tool: str, arguments: dict[str, Any], principal: Any) -> dict[str, Any]:
    """Call ``tool`` through the ``/mcp`` endpoint's stateless core and runner (see above); the
    answer as the page shows it: ``result`` or ``error``, and the notifications sent."""
    body, headers = request(app, tool, arguments)
    msg = jsonrpc.decode(body)
    channel = _Capture()
    (action,) = streamable.stateless.receive_message(msg, stateless=True, headers=headers, origin=channel)
    if isinstance(action, Run):
        action.request.principal = principal
        await streamable.stateless_runner.execute([action], inline=True)
        answer = channel.answer_
    else:  # refused before it ran (busy, a bad envelope)
        answer = action.answer  # type: ignore[attr-defined]
    out: dict[str, Any] = {"messages": channel.messages}
    if answer is None:
        out["error"] = {"code": None, "message": "the call was cancelled"}
    elif answer.error is not None:
        out["error"] = msgspec.to_builtins(answer.error)
    else:
        out["result"] = jsonrpc.to_plain(answer.result)
    return out

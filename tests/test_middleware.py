"""Middleware through the real dispatcher: order, composition, argument rewriting, answering
early, refusing, method filters; and over a real `mcpkit serve` with installed plugins."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import mcpkit
import mcpkit.client as mc
import mcpkit.testing
from mcpkit.plugins.loader import PluginError

from .helpers import Server
from .test_plugins import ECHO, env_for, make_dist, site  # noqa: F401 (site: fixture)


class Tools:
    calls: list[dict[str, Any]] = []

    @mcpkit.hookimpl
    def mcpkit_tools(self) -> list[Any]:
        @mcpkit.tool
        async def add(a: int, b: int = 0) -> int:
            Tools.calls.append({"a": a, "b": b})
            return a + b

        return [add]

    @mcpkit.hookimpl
    def mcpkit_prompts(self) -> list[Any]:
        @mcpkit.prompt
        def hi(name: str) -> str:
            return f"hi {name}"

        return [hi]


def tracer(label: str, trail: list[str], order: int = 0, methods: Any = None) -> Any:
    @mcpkit.middleware(name=label, order=order, methods=methods)
    async def mw(call: mcpkit.Call, call_next: Any) -> dict[str, Any]:
        trail.append(f"{label}>{call.method}")
        try:
            return await call_next()
        finally:
            trail.append(f"{label}<")
    return mw


class Wrappers:
    def __init__(self, *middleware: Any) -> None:
        self.middleware = list(middleware)

    @mcpkit.hookimpl
    def mcpkit_middleware(self) -> list[Any]:
        return self.middleware


async def test_order_and_composition() -> None:
    trail: list[str] = []
    plugins = {"a": Wrappers(tracer("a1", trail, methods={"tools/call"}), tracer("a2", trail)),
               "b": Wrappers(tracer("b-outer", trail, order=-1, methods={"tools/call"})),
               "tools": Tools()}
    async with mcpkit.testing.connect(plugins) as client:
        trail.clear()
        assert (await client.call_tool("add", {"a": 2, "b": 3})).structured == {"result": 5}
        assert trail == ["b-outer>tools/call", "a1>tools/call", "a2>tools/call", "a2<", "a1<", "b-outer<"]
        trail.clear()
        await client.list_tools(refresh=True)  # only a2 wraps every method
        assert trail == ["a2>tools/list", "a2<"]


async def test_arguments_can_be_rewritten_and_calls_answered_early() -> None:
    seen: list[mcpkit.Call] = []

    @mcpkit.middleware(methods={"tools/call"})
    async def defaults(call: mcpkit.Call, call_next: Any) -> dict[str, Any]:
        seen.append(call)
        assert call.arguments is not None
        call.arguments.setdefault("b", 100)
        return await call_next()

    cache: dict[str, dict[str, Any]] = {}

    async def memo(call: mcpkit.Call, call_next: Any) -> dict[str, Any]:  # a plain async function works too
        key = json.dumps([call.method, call.target, call.arguments], sort_keys=True)
        if key not in cache:
            cache[key] = await call_next()
        return cache[key]

    Tools.calls = []
    async with mcpkit.testing.connect({"mw": Wrappers(memo, defaults), "tools": Tools()}) as client:
        first = await client.call_tool("add", {"a": 1})
        again = await client.call_tool("add", {"a": 1})
    assert first.structured == again.structured == {"result": 101}
    assert Tools.calls == [{"a": 1, "b": 100}]  # the second came from the cache
    call = seen[0]
    assert (call.method, call.tool, call.plugin, call.protocol_version) == ("tools/call", "add", "tools", "2026-07-28")
    assert call.params["name"] == "add" and call.client_info["name"] == "mcpkit"


async def test_refusals_and_what_middleware_sees_of_bad_requests() -> None:
    outcomes: list[tuple[str, str]] = []

    async def deny_and_watch(call: mcpkit.Call, call_next: Any) -> dict[str, Any]:
        if (call.arguments or {}).get("a") == 13 or call.target == "hi" and call.params.get("arguments", {}).get("name") == "x":
            raise mcpkit.ToolError("refused by policy")
        try:
            result = await call_next()
        except Exception as exc:
            outcomes.append((str(call.target), f"raised {exc}"))
            raise
        outcomes.append((str(call.target), "error" if result.get("isError") else "ok"))
        return result

    async with mcpkit.testing.connect({"mw": Wrappers(deny_and_watch), "tools": Tools()}) as client:
        refused = await client.call_tool("add", {"a": 13})
        assert (refused.is_error, refused.text) == (True, "refused by policy")
        with pytest.raises(mc.McpError, match="refused by policy"):
            await client.get_prompt("hi", {"name": "x"})
        with pytest.raises(mc.McpError, match="Unknown tool: nope"):
            await client.call_tool("nope", {}, validate=False)
        bad = await client.call_tool("add", {"a": "two"}, validate=False)
        assert bad.is_error and "argument `a`" in bad.text
    assert outcomes[-2:] == [("nope", "raised Unknown tool: nope"), ("add", "error")]


def test_a_middleware_that_is_not_async_is_a_load_error() -> None:
    def sync_mw(call: Any, call_next: Any) -> Any:
        return call_next()

    with pytest.raises(PluginError, match="plugin mw: middleware 'sync_mw' must be an async function"):
        mcpkit.testing.build_app({"mw": Wrappers(sync_mw)})


AUDIT = """
    import mcpkit

    @mcpkit.middleware(methods={"tools/call"})
    async def tag(call, call_next):
        result = await call_next()
        result.setdefault("_meta", {})["acme/audited-by"] = call.plugin
        return result

    @mcpkit.hookimpl
    def mcpkit_middleware(config):
        return [tag]
"""


def test_installed_middleware_over_stdio_with_the_invocation_log(site: Path) -> None:
    make_dist(site, "acme-echo", "echo", "acme_echo", ECHO)
    make_dist(site, "acme-audit", "audit", "acme_audit", AUDIT)
    env = env_for(site, MCPKIT_PLUGIN__INVOCATION_LOG__FORMAT="json", MCPKIT_PLUGIN__INVOCATION_LOG__ENABLED="true")
    with Server("--plugin", "echo", "--plugin", "audit", "--plugin", "invocation_log", env=env) as srv:
        srv.initialize()
        reply = srv.request("tools/call", {"name": "echo_config", "arguments": {}})["result"]
        srv.request("tools/call", {"name": "missing", "arguments": {"x": 1}})
        assert srv.close() == 0
    assert reply["_meta"] == {"acme/audited-by": "echo"}
    lines = [json.loads(line) for line in srv.stderr.decode().splitlines() if line.startswith("{")]
    assert [(r["tool"], r["plugin"], r["outcome"], r["results"]) for r in lines] == [
        ("echo_config", "echo", "ok", 1), ("missing", None, "failed", None)]
    assert lines[1]["arguments_bytes"] == len('{"x":1}') and lines[0]["client"] == "tests 0"

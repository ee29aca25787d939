"""pluggy's hook options work on mcpkit's hooks: wrappers (new and old style) see and change each
plugin's result, and tryfirst / trylast order the plugins' tools and middleware."""

from __future__ import annotations

from typing import Any

import mcpkit
from mcpkit.testing import build_app, connect


def make_tool(name: str) -> Any:
    async def fn() -> str:
        return name

    fn.__name__ = name
    return mcpkit.tool(fn)


class Alpha:
    @mcpkit.hookimpl
    def mcpkit_tools(self) -> list[Any]:
        return [make_tool("alpha_one"), make_tool("alpha_secret")]

    @mcpkit.hookimpl
    def mcpkit_prompts(self) -> list[Any]:
        return []


class Beta:
    @mcpkit.hookimpl(tryfirst=True)
    def mcpkit_tools(self) -> list[Any]:
        return [make_tool("beta_one")]


class Gamma:
    @mcpkit.hookimpl(trylast=True)
    def mcpkit_tools(self) -> list[Any]:
        return [make_tool("gamma_one")]


class Policy:
    """A plugin that serves nothing itself and filters what every other plugin offers."""

    seen: list[str] = []

    @mcpkit.hookimpl(wrapper=True)
    def mcpkit_tools(self, plugin: str) -> Any:
        Policy.seen.append(plugin)
        results = yield
        return [[t for t in items if not t.name.endswith("_secret")] for items in results]

    @mcpkit.hookimpl(hookwrapper=True)
    def mcpkit_prompts(self, plugin: str) -> Any:
        outcome = yield
        outcome.force_result([[mcpkit.prompt(lambda: "hi", name=f"hello_from_{plugin}")]] if plugin == "alpha" else outcome.get_result())


def test_tryfirst_and_trylast_order_the_plugins_tools() -> None:
    app, _, _ = build_app({"alpha": Alpha(), "gamma": Gamma(), "beta": Beta()})
    assert list(app.registry.tools) == ["beta_one", "alpha_one", "alpha_secret", "gamma_one"]


def test_without_options_plugins_keep_their_order() -> None:
    class Plain:
        @mcpkit.hookimpl
        def mcpkit_tools(self) -> list[Any]:
            return [make_tool("plain_one")]

    app, _, _ = build_app({"plain": Plain(), "alpha": Alpha()})
    assert list(app.registry.tools) == ["plain_one", "alpha_one", "alpha_secret"]
    app, _, _ = build_app({"alpha": Alpha(), "plain": Plain()})
    assert list(app.registry.tools) == ["alpha_one", "alpha_secret", "plain_one"]


def test_a_wrapper_sees_every_plugins_result_and_may_change_it() -> None:
    Policy.seen = []
    app, _, _ = build_app({"alpha": Alpha(), "beta": Beta(), "policy": Policy()})
    assert set(app.registry.tools) == {"alpha_one", "beta_one"}
    assert sorted(Policy.seen) == ["alpha", "beta"]  # once per plugin that implements the hook
    assert app.registry.owner[("tool", "alpha_one")] == "alpha"  # still served under its own name


def test_an_old_style_hookwrapper_can_replace_a_result() -> None:
    app, _, _ = build_app({"alpha": Alpha(), "policy": Policy()})
    assert list(app.registry.prompts) == ["hello_from_alpha"]
    assert app.registry.owner[("prompt", "hello_from_alpha")] == "alpha"


order: list[str] = []


def recording(label: str) -> Any:
    @mcpkit.middleware(name=label, methods={"tools/call"})
    async def mw(call: mcpkit.Call, call_next: Any) -> dict[str, Any]:
        order.append(label)
        return await call_next()

    return mw


class FirstMw:
    @mcpkit.hookimpl(tryfirst=True)
    def mcpkit_middleware(self) -> list[Any]:
        return [recording("first")]

    @mcpkit.hookimpl
    def mcpkit_tools(self) -> list[Any]:
        return [make_tool("ping_tool")]


class LastMw:
    @mcpkit.hookimpl(trylast=True)
    def mcpkit_middleware(self) -> list[Any]:
        return [recording("last")]


async def test_tryfirst_middleware_is_outermost_among_equal_orders() -> None:
    order.clear()
    async with connect({"last": LastMw(), "first": FirstMw()}) as client:
        await client.call_tool("ping_tool", {})
    assert order == ["first", "last"]

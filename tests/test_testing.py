"""mcpkit.testing: the in-memory pair must answer exactly as `mcpkit serve` over a real pipe does,
and its pytest fixture and strict checks must work for plugin authors."""

from __future__ import annotations

from typing import Any, Callable

import msgspec
import pytest

import hello_plugin  # the fixture plugin, from the fixture site (see conftest.py)
import mcpkit
import mcpkit.client as mc
import mcpkit.testing
from mcpkit.plugins.loader import PluginError

from .helpers import MCPKIT


async def _script(client: mc.Client) -> list[Any]:
    """Every kind of request, with their answers or errors, in a comparable form."""
    out: list[Any] = []

    async def record(label: str, make: Callable[[], Any]) -> None:
        try:
            value = await make()
        except mc.McpError as exc:
            value = {"error": type(exc).__name__, "message": str(exc)}
        out.append((label, msgspec.to_builtins(value)))

    progress: list[Any] = []
    await record("tools", client.list_tools)
    await record("resources", client.list_resources)
    await record("templates", client.list_resource_templates)
    await record("prompts", client.list_prompts)
    await record("greet", lambda: _raw(client.call_tool("greet", {"name": "Ada", "excited": True})))
    await record("count", lambda: _raw(client.call_tool("count", {"to": 3, "delay": 0},
                                                         progress=lambda *a: progress.append(a))))
    await record("forecast", lambda: _raw(client.call_tool("forecast", {"city": "Oslo"})))
    await record("word_count", lambda: _raw(client.call_tool("word_count", {"text": "a b c"})))
    await record("fail", lambda: _raw(client.call_tool("fail", {"message": "boom"})))
    await record("sleepy", lambda: _raw(client.call_tool("sleepy", {"seconds": 5})))
    await record("bad args", lambda: _raw(client.call_tool("greet", {"name": 5}, validate=False)))
    await record("unknown tool", lambda: _raw(client.call_tool("nosuch", {}, validate=False)))
    await record("read", lambda: client.read_resource("hello://greeting"))
    await record("template", lambda: client.read_resource("hello://people/Ida%20B"))
    await record("missing", lambda: client.read_resource("hello://nothing"))
    await record("prompt", lambda: client.get_prompt("introduce", {"name": "Ada"}))
    await record("complete", lambda: client.complete({"type": "ref/prompt", "name": "introduce"}, "style", "f"))
    await record("ping", client.ping)
    out.append(("progress", progress))
    return out


async def _raw(call: Any) -> dict[str, Any]:
    return (await call).raw


@pytest.mark.parametrize("mode", ["stateless", "handshake"])
async def test_in_memory_answers_equal_the_subprocess(mode: str) -> None:
    async with mc.connect([MCPKIT, "serve", "--plugin", "hello"], mode=mode, remember_era=False) as client:
        over_pipe = await _script(client)
        pipe_description = (await client.discover()).to_dict()
    async with mcpkit.testing.connect(hello_plugin, mode=mode) as client:
        in_memory = await _script(client)
        memory_description = (await client.discover()).to_dict()
    assert dict(in_memory) == dict(over_pipe)
    assert memory_description == pipe_description
    results = dict(in_memory)
    assert results["greet"]["content"][0]["text"] == "Hello, Ada!"
    assert len(results["progress"]) == 3 and results["sleepy"]["isError"] is True
    assert "Unknown tool: nosuch" in results["unknown tool"]["message"]


async def test_config_reaches_the_plugin_and_strict_catches_mistakes() -> None:
    class Configured:
        @mcpkit.hookimpl
        def mcpkit_tools(self, config: dict[str, Any]) -> list[Any]:
            @mcpkit.tool(name="colour")
            async def colour() -> str:
                return config["colour"]
            return [colour]

    config = {"server": {"name": "in-memory"}, "plugins": {"acme": {"colour": "blue", "prefix": "acme"}}}
    async with mcpkit.testing.connect({"acme": Configured()}, config=config) as client:
        assert (await client.call_tool("acme_colour")).text == "blue"
        assert (await client.discover()).server_info["name"] == "in-memory"

    class Unmarked:
        def mcpkit_tools(self, config: dict[str, Any]) -> list[Any]:
            return []

    with pytest.raises(PluginError, match="function mcpkit_tools is not marked @mcpkit.hookimpl"):
        mcpkit.testing.build_app({"unmarked": Unmarked()})
    app, _, _ = mcpkit.testing.build_app({"unmarked": Unmarked()}, strict=False)
    assert app.plugins[0].warnings and not app.registry.tools


def test_plugin_names() -> None:
    assert mcpkit.testing.plugin_name(hello_plugin) == "hello_plugin"
    import mcpkit_codesearch.plugin

    assert mcpkit.testing.plugin_name(mcpkit_codesearch.plugin) == "mcpkit_codesearch"


@pytest.fixture
def mcpkit_plugins() -> list[Any]:
    return [hello_plugin]


async def test_the_pytest_fixture(mcpkit_client: mc.Client) -> None:
    result = await mcpkit_client.call_tool("forecast", {"city": "Lima"})
    assert result.structured["city"] == "Lima" and not result.is_error
    assert [t["name"] for t in await mcpkit_client.list_tools()][:2] == ["greet", "count"]


async def test_prefix_and_rename_cover_prompts_completions_and_resources() -> None:
    config = {"plugins": {"hello": {"prefix": "hi", "rename": {"greet": "say_hello",
                                                                "hello://people/{name}": "friends://{name}"}}}}
    async with mcpkit.testing.connect({"hello": hello_plugin}, config=config) as client:
        names = [t["name"] for t in await client.list_tools()]
        assert names[:3] == ["say_hello", "hi_count", "hi_forecast"]
        assert [p["name"] for p in await client.list_prompts()] == ["hi_introduce"]
        assert await client.complete({"type": "ref/prompt", "name": "hi_introduce"}, "style", "f") == ["formal", "friendly", "funny"]
        assert [t["uriTemplate"] for t in await client.list_resource_templates()] == ["friends://{name}"]
        (content,) = await client.read_resource("friends://Ida")
        assert content["text"] == "Ida is a friend of the hello plugin."
    bad = {"plugins": {"hello": {"rename": {"hello://people/{name}": "friends://{who}"}}}}
    with pytest.raises(PluginError, match=r"the URI variable \{who\} is not a parameter"):
        mcpkit.testing.build_app({"hello": hello_plugin}, bad)


def test_a_renamed_resource_keeps_its_scopes() -> None:
    """Renaming a resource must not open it to callers without the scopes it requires."""
    from mcpkit.plugins.naming import Naming
    from mcpkit.server.resources import ResourceDef

    def secret() -> str:
        return "s"

    item = ResourceDef(secret, "x://secret", scopes=["admin"], description="d", mime_type="text/plain")
    renamed = Naming(rename={"x://secret": "y://secret"}).apply(item)
    assert renamed.uri == "y://secret" and renamed is not item
    assert renamed.scopes == item.scopes and item.scopes
    assert (renamed.description, renamed.mime_type, renamed.listed) == ("d", "text/plain", True)

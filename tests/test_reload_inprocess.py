"""The reloader of `mcpkit dev` in one trio run: real plugin files and folders rewritten on disk,
the app `mcpkit dev` builds, and mcpkit's client connected in memory (mcpkit.testing's pipe).
What a subprocess test cannot easily see: middleware swapped, a package's submodules re-read, a
lifespan that fails, --strict, resources/updated."""

from __future__ import annotations

import dataclasses
import textwrap
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import trio

import mcpkit.testing
from mcpkit.client import connect
from mcpkit.plugins.loader import lifespans
from mcpkit.plugins.reload import Reloader
from mcpkit.server.lifespan import plugin_lifespans


@asynccontextmanager
async def dev_served(path: Path, *, strict: bool = False) -> AsyncIterator[tuple[Any, Reloader, list[tuple[str, Any]]]]:
    app, loaded, config = mcpkit.testing.build_app([path], strict=strict)
    app.reloading = True
    reloader = Reloader(app, loaded, config, strict=strict)
    seen: list[tuple[str, Any]] = []
    async with plugin_lifespans(app, lifespans(loaded, config, skip=loaded.paths)), reloader.running(), \
            trio.open_nursery() as nursery:
        transport = mcpkit.testing.MemoryTransport(app, nursery)
        async with connect("dev", transport=transport, mode="handshake", remember_era=False,
                           on_notification=lambda method, params: seen.append((method, params))) as client:
            yield client, reloader, seen
        nursery.cancel_scope.cancel()


def write(path: Path, text: str) -> None:
    path.write_text(textwrap.dedent(text))


def plugin(version: int, *, lifespan: str = "", extra: str = "") -> str:
    return f'''
import contextlib
import mcpkit

@mcpkit.tool
def echo(text: str) -> str:
    """Echo."""
    return text

@mcpkit.middleware(methods={{"tools/call"}})
async def tag(call, call_next):
    result = await call_next()
    result["content"][0].text += " [mw v{version}]"
    return result

@mcpkit.resource("weather://about", mime_type="text/plain")
def about() -> str:
    return "v{version}"

{extra}

@mcpkit.hookimpl
def mcpkit_tools(config):
    return [echo]

@mcpkit.hookimpl
def mcpkit_middleware(config):
    return [tag]

@mcpkit.hookimpl
def mcpkit_resources(config):
    return [about]
{lifespan}
'''


async def test_middleware_and_resources_follow_a_reload(tmp_path: Path) -> None:
    path = tmp_path / "weather.py"
    write(path, plugin(1))
    async with dev_served(path) as (client, reloader, seen):
        assert (await client.call_tool("echo", {"text": "hi"})).text == "hi [mw v1]"
        await client.request("resources/subscribe", {"uri": "weather://about"})
        write(path, plugin(2))
        with reloader.app.hub.listen() as events:  # what a console listens to
            result = await reloader.reload("weather")
            hub = []
            while events.statistics().current_buffer_used:
                hub.append(events.receive_nowait())
        assert hub[-1] == ("dev/reload", dataclasses.asdict(result)) and hub[-1][1]["ok"] is True
        assert result.ok and result.summary().startswith("reloaded weather in") and not result.added
        assert (await client.call_tool("echo", {"text": "hi"})).text == "hi [mw v2]"
        (content,) = await client.read_resource("weather://about")
        assert content["text"] == "v2"
        await trio.sleep(0.05)
        assert ("notifications/resources/updated", {"uri": "weather://about"}) in seen
        assert not any(method == "notifications/tools/list_changed" for method, _ in seen)  # nothing listed changed


async def test_a_lifespan_that_fails_to_open_keeps_the_last_good_version(tmp_path: Path) -> None:
    path, log = tmp_path / "weather.py", tmp_path / "log"
    life = f'''
@contextlib.asynccontextmanager
async def held():
    if VERSION == 2:
        raise RuntimeError("the database is locked")
    open({str(log)!r}, "a").write(f"enter v{{VERSION}}\\n")
    yield
    open({str(log)!r}, "a").write(f"exit v{{VERSION}}\\n")

@mcpkit.hookimpl
def mcpkit_lifespan(config):
    return held()
'''
    write(path, plugin(1, lifespan=life, extra="VERSION = 1"))
    async with dev_served(path) as (client, reloader, _):
        write(path, plugin(2, lifespan=life, extra="VERSION = 2"))
        result = await reloader.reload("weather")
        assert not result.ok and result.error == "setup failed: RuntimeError: the database is locked"
        assert (await client.call_tool("echo", {"text": "hi"})).text == "hi [mw v1]"
        assert log.read_text() == "enter v1\n"  # the old lifespan stays open
        write(path, plugin(3, lifespan=life, extra="VERSION = 3"))
        assert (await reloader.reload("weather")).ok
        await trio.sleep(0.2)
        assert log.read_text() == "enter v1\nenter v3\nexit v1\n"
    assert log.read_text() == "enter v1\nenter v3\nexit v1\nexit v3\n"


async def test_strict_refuses_a_save_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "weather.py"
    write(path, plugin(1))
    async with dev_served(path, strict=True) as (client, reloader, _):
        write(path, plugin(2, extra="@mcpkit.tool\ndef loose(value) -> str:\n    return str(value)\n").replace(
            "return [echo]", "return [echo, loose]"))
        result = await reloader.reload("weather")
        assert not result.ok and "parameter 'value' has no type hint" in result.error and "--strict" in result.error
        assert [t["name"] for t in await client.list_tools(refresh=True)] == ["echo"]


async def test_a_package_is_read_again_whole(tmp_path: Path) -> None:
    pkg = tmp_path / "almanac"
    pkg.mkdir()
    write(pkg / "sun.py", "RISE = '06:12'\n")
    write(pkg / "__init__.py", '''
        import mcpkit
        from . import sun

        @mcpkit.tool
        def sunrise() -> str:
            """When the sun rises."""
            return sun.RISE

        @mcpkit.hookimpl
        def mcpkit_tools(config):
            return [sunrise]
        ''')
    async with dev_served(pkg) as (client, reloader, seen):
        assert (await client.call_tool("sunrise", {})).text == "06:12"
        write(pkg / "sun.py", "RISE = '06:14'\n")  # the same size, the same second: no stale bytecode
        assert (await reloader.reload("almanac")).ok
        assert (await client.call_tool("sunrise", {})).text == "06:14"
        write(pkg / "sun.py", "RISE = \n")  # a broken submodule: the package as it was serves on
        failed = await reloader.reload("almanac")
        assert not failed.ok and "SyntaxError" in failed.error and "sun.py" in failed.error
        assert (await client.call_tool("sunrise", {})).text == "06:14"


async def test_items_another_plugin_changed_while_serving_survive_a_reload(tmp_path: Path) -> None:
    """A plugin may replace its own items at run time (the gateway's upstreams do, after each
    upstream listing): a reload of another plugin keeps them as they are served, in place."""
    path, other = tmp_path / "weather.py", tmp_path / "other.py"
    write(path, plugin(1))
    write(other, '''
        import mcpkit

        @mcpkit.tool
        def first() -> str:
            return "first"

        @mcpkit.hookimpl
        def mcpkit_tools(config):
            return [first]
        ''')
    app, loaded, config = mcpkit.testing.build_app([other, path])
    reloader = Reloader(app, loaded, config)
    async with reloader.running():
        late = mcpkit.ToolDef(lambda: "late", name="late")
        app.registry.tools = {"late": late, **{k: v for k, v in app.registry.tools.items() if k != "first"}}
        app.registry.owner.pop(("tool", "first"))
        app.registry.owner[("tool", "late")] = "other"
        write(path, plugin(2))
        assert (await reloader.reload("weather")).ok
        assert list(app.registry.tools) == ["late", "echo"] and app.registry.tools["late"] is late
        assert app.registry.owner[("tool", "late")] == "other"

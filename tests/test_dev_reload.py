"""`mcpkit dev PATH`: a real server process, a real client connected (mcpkit.client over stdio
and HTTP, the official SDK client over stdio), and the plugin file edited on disk."""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest
import trio

import mcpkit.client as mc
from mcpkit.client.errors import InvalidParams
from mcpkit.client.transports.stdio import StdioTransport

from .helpers import MCPKIT

#: how long a save may take to be served here (a loaded test machine); the figure the docs give
#: comes from bench/bench_reload.py
SERVED_WITHIN_S = 5.0


def source(version: int, tools: list[str], *, lifespan_log: Path | None = None) -> str:
    """A plugin whose tools answer with their version; ``slow`` marks that it started."""
    defs = "\n".join(f'''
@mcpkit.tool
def {name}() -> str:
    """Tool {name}."""
    return "{name} v{version}"
''' for name in tools)
    life = ""
    if lifespan_log is not None:
        life = f'''
import contextlib

@contextlib.asynccontextmanager
async def held():
    with open({str(lifespan_log)!r}, "a") as fh:
        fh.write("enter v{version}\\n")
    yield
    with open({str(lifespan_log)!r}, "a") as fh:
        fh.write("exit v{version}\\n")

@mcpkit.hookimpl
def mcpkit_lifespan(config):
    return held()
'''
    done = "" if lifespan_log is None else f"open({str(lifespan_log)!r}, 'a').write('slow done v{version}' + chr(10))"
    return f'''import pathlib
import trio
import mcpkit
{defs}

@mcpkit.tool
async def slow(seconds: float, marker: str) -> str:
    """Sleeps, having said it started."""
    pathlib.Path(marker).write_text("started")
    await trio.sleep(seconds)
    {done}
    return "slow v{version}"
{life}

@mcpkit.hookimpl
def mcpkit_tools(config):
    return [{", ".join([*tools, "slow"])}]
'''


def save(path: Path, text: str) -> None:
    """As most editors save: a new file renamed over the old one."""
    tmp = path.with_name(f".{path.name}.saving")
    tmp.write_text(text)
    os.replace(tmp, path)


async def until(check: Callable[[], Any], what: str, timeout: float = SERVED_WITHIN_S) -> Any:
    deadline = trio.current_time() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if trio.current_time() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await trio.sleep(0.01)


async def served(client: Any, tool: str, answer: str) -> bool:
    try:
        result = await client.call_tool(tool, {}, validate=False)
    except InvalidParams:  # not (yet) a tool
        return False
    return not result.is_error and result.text == answer


@pytest.mark.parametrize("watcher", ["watchfiles", "polling"])
async def test_a_save_reaches_a_connected_client(tmp_path: Path, watcher: str) -> None:
    plugin, marker, err_path = tmp_path / "weather.py", tmp_path / "started", tmp_path / "stderr"
    plugin.write_text(source(1, ["sunny", "rain"]))
    seen: list[str] = []
    command = [MCPKIT, "dev", str(plugin), "--plugin", "weather", *(["--poll"] if watcher == "polling" else [])]
    with err_path.open("wb") as err:
        transport = StdioTransport(command, stderr=err)
        async with mc.connect(command, transport=transport, mode="handshake",
                              on_notification=lambda method, params: seen.append(method)) as client:
            stderr = err_path.read_text
            await until(lambda: "watching" in stderr(), "the banner")
            assert f"({watcher}" in stderr()  # watchfiles comes with the [dev] extra `make install` installs
            assert {t["name"] for t in await client.list_tools()} == {"sunny", "rain", "slow"}
            async with trio.open_nursery() as nursery:
                slow: list[str] = []

                async def call_slow() -> None:
                    slow.append((await client.call_tool("slow", {"seconds": 1.0, "marker": str(marker)})).text)

                nursery.start_soon(call_slow)
                await until(marker.exists, "the slow call started")
                start = time.perf_counter()
                save(plugin, source(2, ["sunny", "humidity"]))  # humidity added, rain removed
                await until(lambda: served(client, "humidity", "humidity v2"), "the new tool answering")
                took = time.perf_counter() - start
            assert slow == ["slow v1"]  # started before the save: finished on the old code
            assert "notifications/tools/list_changed" in seen
            assert {t["name"] for t in await client.list_tools(refresh=True)} == {"sunny", "humidity", "slow"}
            with pytest.raises(InvalidParams, match="Unknown tool: rain"):
                await client.call_tool("rain", {}, validate=False)
            assert await served(client, "sunny", "sunny v2")
            assert re.search(r"reloaded weather in \d+ ms: tools \+humidity -rain", stderr())
            print(f"{watcher}: save -> new tool answering in {took * 1000:.0f} ms")

            # a broken save: the last good version keeps serving, the error is reported
            seen.clear()
            save(plugin, source(3, ["sunny", "storm"]).replace("import trio", "import trio\ndef broken(:"))
            await until(lambda: "reload failed" in stderr(), "the failed reload reported")
            line = next(line for line in stderr().splitlines() if "reload failed" in line)
            assert "the last good version keeps serving" in line and "SyntaxError" in line and "line 3" in line
            assert await served(client, "humidity", "humidity v2") and await served(client, "sunny", "sunny v2")
            assert "notifications/tools/list_changed" not in seen

            # fixed: it recovers
            save(plugin, source(4, ["sunny", "storm"]))
            await until(lambda: served(client, "storm", "storm v4"), "the fixed version answering")
            assert "notifications/tools/list_changed" in seen


def test_the_official_sdk_client_is_told_and_sees_the_new_tool(tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters, types

    plugin = tmp_path / "weather.py"
    plugin.write_text(source(1, ["sunny"]))
    params = StdioServerParameters(command=MCPKIT, args=["dev", str(plugin), "--plugin", "weather"],
                                   env={k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH")})

    async def exercise() -> tuple[list[str], list[str], str, list[str]]:
        told = asyncio.Event()
        notices: list[str] = []

        async def on_message(message: Any) -> None:
            notices.append(type(message).__name__)
            if isinstance(message, types.ToolListChangedNotification):
                told.set()

        async with Client(params, mode="legacy", message_handler=on_message) as client:
            before = [t.name for t in (await client.list_tools()).tools]
            await asyncio.sleep(0.3)  # the watcher is running by now (the banner comes before serving)
            save(plugin, source(2, ["sunny", "humidity"]))
            await asyncio.wait_for(told.wait(), SERVED_WITHIN_S)
            after = [t.name for t in (await client.list_tools()).tools]
            answer = (await client.call_tool("humidity", {})).content[0].text
            return before, after, answer, notices

    before, after, answer, notices = asyncio.run(exercise())
    assert before == ["sunny", "slow"] and after == ["sunny", "humidity", "slow"]
    assert answer == "humidity v2" and "ToolListChangedNotification" in notices


class DevHttp:
    """``mcpkit dev --transport http --port 0`` and the URL it serves on."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([MCPKIT, "dev", "--transport", "http", "--port", "0", *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.stderr = ""
        self.url = ""
        ready = threading.Event()

        def pump() -> None:
            assert self.proc.stderr is not None
            for raw in self.proc.stderr:
                self.stderr += raw.decode(errors="replace")
                found = re.search(r"serving MCP on (http://127\.0\.0\.1:\d+)/mcp", self.stderr)
                if found and "watching" in self.stderr:
                    self.url = found.group(1)
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(30):
            self.proc.kill()
            raise RuntimeError(f"mcpkit dev did not start: {self.stderr}")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(20)


async def test_over_http_the_session_stream_gets_list_changed_and_lifespans_turn_over(tmp_path: Path) -> None:
    plugin, marker, life = tmp_path / "weather.py", tmp_path / "started", tmp_path / "lifespans"
    plugin.write_text(source(1, ["sunny"], lifespan_log=life))
    server = DevHttp(str(plugin), "--plugin", "weather")
    try:
        seen: list[str] = []
        async with mc.connect(f"{server.url}/mcp", mode="handshake",
                              on_notification=lambda method, params: seen.append(method)) as client:
            assert life.read_text() == "enter v1\n"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call_tool, "slow", {"seconds": 3.0, "marker": str(marker)})
                await until(marker.exists, "the slow call started")
                save(plugin, source(2, ["sunny", "humidity"], lifespan_log=life))
                await until(lambda: served(client, "humidity", "humidity v2"), "the new tool answering")
                # the new version's lifespan is open; the old one waits for the call it serves
                assert life.read_text() == "enter v1\nenter v2\n"
            await until(lambda: "exit v1" in life.read_text(), "the old lifespan closed")
            assert life.read_text() == "enter v1\nenter v2\nslow done v1\nexit v1\n"
            await until(lambda: "notifications/tools/list_changed" in seen, "list_changed on the session's stream")
    finally:
        assert server.stop() == 0, server.stderr
    assert life.read_text().endswith("exit v1\nexit v2\n")
    assert f"mcpkit dev: try it in the browser: {server.url}/console" in server.stderr  # dev over HTTP serves the console


async def test_a_reload_that_would_clash_with_an_installed_plugin_is_refused(tmp_path: Path) -> None:
    plugin = tmp_path / "weather.py"
    plugin.write_text(source(1, ["sunny"]))
    server = DevHttp(str(plugin), "--plugin", "weather", "--plugin", "hello")
    try:
        async with mc.connect(f"{server.url}/mcp") as client:
            save(plugin, source(2, ["greet"]))  # the hello plugin's tool
            await until(lambda: "reload failed" in server.stderr, "the refused reload reported")
            assert "tool 'greet' is offered by both plugin 'hello' and plugin 'weather'" in server.stderr
            assert await served(client, "sunny", "sunny v1")
            greeted = await client.call_tool("greet", {"name": "Ada"})
            assert greeted.text == "Hello, Ada."
    finally:
        assert server.stop() == 0, server.stderr


def test_dev_needs_a_path(tmp_path: Path) -> None:
    out = subprocess.run([MCPKIT, "dev", "--plugin", "hello"], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "mcpkit dev reloads plugins given by path" in out.stderr

"""The official `mcp` Python SDK client, which nobody here wrote, against `mcpkit serve` over stdio."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest
from mcp import Client, StdioServerParameters

from .helpers import MCPKIT


pytestmark = pytest.mark.usefixtures("http_server_kind")


def _params() -> StdioServerParameters:
    # The SDK hands the server only a few safe variables; PYTHONPATH brings the hello fixture.
    return StdioServerParameters(command=MCPKIT, args=["serve", "--plugin", "hello"],
                                 env={"PYTHONPATH": os.environ["PYTHONPATH"]})


async def _exercise(mode: str) -> dict:
    progress: list[float] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(p)

    async with Client(_params(), mode=mode) as client:
        tools = await client.list_tools()
        names = [t.name for t in tools.tools]
        greet = await client.call_tool("greet", {"name": "SDK", "excited": True})
        fc = await client.call_tool("forecast", {"city": "Lima"})
        counted = await client.call_tool("count", {"to": 3, "delay": 0}, progress_callback=on_progress)
        failed = await client.call_tool("fail", {"message": "nope"})
        bad = await client.call_tool("count", {"to": -5})
        res = await client.read_resource("hello://people/Ida")
        prompt = await client.get_prompt("introduce", {"name": "Ida"})
        return {
            "version": client.protocol_version, "names": names, "greet": greet.content[0].text,
            "structured": fc.structured_content, "progress": progress, "counted": counted.content[0].text,
            "failed": (failed.is_error, failed.content[0].text), "bad": bad.is_error,
            "resource": res.contents[0].text, "prompt": prompt.messages[0].content.text,
        }


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_official_sdk_client_over_stdio(mode: str) -> None:
    out = asyncio.run(_exercise(mode))
    assert out["version"] == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert {"greet", "count", "forecast", "word_count"} <= set(out["names"])
    assert out["greet"] == "Hello, SDK!"
    assert out["structured"]["city"] == "Lima"
    assert out["progress"] == [1, 2, 3]
    assert out["counted"] == "Counted to 3."
    assert out["failed"] == (True, "nope")
    assert out["bad"] is True
    assert out["resource"] == "Ida is a friend of the hello plugin."
    assert out["prompt"] == "Please introduce Ida in a formal style."


@pytest.fixture(scope="module")
def http_server(http_server_kind):
    from .http_helpers import HttpServer

    with HttpServer("--plugin", "hello") as srv:
        yield srv


async def _exercise_url(url: str, mode: str) -> dict:
    progress: list[float] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(p)

    async with Client(url, mode=mode) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        greet = await client.call_tool("greet", {"name": "HTTP"})
        counted = await client.call_tool("count", {"to": 3, "delay": 0}, progress_callback=on_progress)
        return {"version": client.protocol_version, "names": names, "greet": greet.content[0].text,
                "progress": progress, "counted": counted.content[0].text}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_official_sdk_client_over_streamable_http(http_server, mode: str) -> None:
    out = asyncio.run(_exercise_url(f"http://127.0.0.1:{http_server.port}/mcp", mode))
    assert out["version"] == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert "greet" in out["names"] and out["greet"] == "Hello, HTTP."
    assert out["progress"] == [1, 2, 3] and out["counted"] == "Counted to 3."


def test_official_sdk_client_over_legacy_sse(http_server) -> None:
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    async def run() -> tuple[str, list[str], str]:
        async with sse_client(f"http://127.0.0.1:{http_server.port}/sse") as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                names = [t.name for t in (await session.list_tools()).tools]
                res = await session.call_tool("greet", {"name": "SSE"})
                return init.protocol_version, names, res.content[0].text

    version, names, text = asyncio.run(run())
    assert version in ("2024-11-05", "2025-11-25") and "greet" in names and text == "Hello, SSE."

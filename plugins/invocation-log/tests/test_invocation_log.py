"""The invocation log through a real (in-memory) server: what each line holds, both formats, the
file option, redaction, and that "auto" costs nothing below the info level."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import trio

import mcpkit
import mcpkit.testing
import mcpkit_invocation_log


class Search:
    """A small search plugin: a structured result with a list of hits, a failing tool, a slow one."""

    @mcpkit.hookimpl
    def mcpkit_tools(self, config: dict[str, Any]) -> list[Any]:
        @mcpkit.tool
        async def find(query: str, token: str = "") -> dict[str, list[str]]:
            return {"hits": [f"{query}-{i}" for i in range(3)]}

        @mcpkit.tool
        async def broken() -> str:
            raise mcpkit.ToolError("no index")

        @mcpkit.tool(timeout=0.05)
        async def slow() -> str:
            await trio.sleep(1)
            return "late"

        return [find, broken, slow]

    @mcpkit.hookimpl
    def mcpkit_resources(self, config: dict[str, Any]) -> list[Any]:
        @mcpkit.resource("search://about")
        def about() -> str:
            return "a search plugin"

        return [about]


def serve(log_config: dict[str, Any]) -> Any:
    return mcpkit.testing.connect({"search": Search(), "invocation_log": mcpkit_invocation_log},
                                  config={"plugins": {"invocation_log": log_config}})


async def test_json_lines_to_a_file(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    async with serve({"format": "json", "file": str(path), "arguments": "values"}) as client:
        await client.call_tool("find", {"query": "pets", "token": "s3cret"})
        await client.call_tool("broken")
        await client.call_tool("slow")
        await client.read_resource("search://about")
        with pytest.raises(mcpkit.client.McpError):
            await client.call_tool("nosuch", validate=False)
        await client.list_tools(refresh=True)  # not an invocation: not logged
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["method"], r.get("tool") or r.get("uri"), r["outcome"]) for r in lines] == [
        ("tools/call", "find", "ok"), ("tools/call", "broken", "error"), ("tools/call", "slow", "error"),
        ("resources/read", "search://about", "ok"), ("tools/call", "nosuch", "failed")]
    find = lines[0]
    assert find["plugin"] == "search" and find["results"] == 3 and find["client"].startswith("mcpkit ")
    assert find["arguments"] == {"query": "pets", "token": "[redacted]"}
    assert find["arguments_bytes"] == len(json.dumps({"query": "pets", "token": "s3cret"}, separators=(",", ":")))
    assert 0 <= find["latency_ms"] < 5000 and find["ts"].endswith("+00:00")
    assert lines[1]["error"] == "no index" and "timed out" in lines[2]["error"]
    assert lines[2]["latency_ms"] >= 50
    assert lines[4]["error"] == "Unknown tool: nosuch" and lines[4]["plugin"] is None


async def test_text_lines_through_the_server_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=mcpkit_invocation_log.LOGGER)
    async with serve({}) as client:  # "auto", and the logger is at info
        await client.call_tool("find", {"query": "pets"})
    # (a set: pytest hooks its capture onto loggers that stopped propagating in an earlier test)
    (line,) = {r.getMessage() for r in caplog.records if r.name == mcpkit_invocation_log.LOGGER}
    assert line.startswith("method=tools/call tool=find plugin=search request_id=")
    assert "arguments_bytes=16 results=3 outcome=ok latency_ms=" in line and "s3cret" not in line


async def test_auto_below_info_adds_no_middleware() -> None:
    logging.getLogger(mcpkit_invocation_log.LOGGER).setLevel(logging.WARNING)
    try:
        async with serve({}) as client:
            assert not client.app.middleware
            await client.call_tool("find", {"query": "pets"})
        async with serve({"enabled": False, "file": "/nonexistent/x.log"}) as client:
            assert not client.app.middleware
    finally:
        logging.getLogger(mcpkit_invocation_log.LOGGER).setLevel(logging.NOTSET)


def test_bad_settings_are_load_errors() -> None:
    with pytest.raises(mcpkit.PluginError, match="format must be"):
        mcpkit.testing.build_app({"invocation_log": mcpkit_invocation_log},
                                 {"plugins": {"invocation_log": {"format": "xml"}}})
    with pytest.raises(mcpkit.PluginError, match="unknown setting 'fromat'"):
        mcpkit.testing.build_app({"invocation_log": mcpkit_invocation_log},
                                 {"plugins": {"invocation_log": {"fromat": "json"}}})

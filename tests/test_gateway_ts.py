"""An upstream written on the official TypeScript SDK (tests/ts_upstream, installed by
`make ts-fixtures`, which `make test` runs) through the gateway, over stdio and Streamable HTTP."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import mcpkit.client as mc

from .gateway_helpers import HERE, Process, free_port, gateway_argv, write_config

TS = HERE / "ts_upstream"
NODE = shutil.which("node")


@pytest.fixture(scope="module", autouse=True)
def ts_fixture() -> None:
    if NODE is None:
        pytest.skip("node is not installed (make test installs it with the fixture)")
    if not (TS / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        subprocess.run(["make", "-s", "ts-fixtures"], cwd=HERE.parent, check=True)


async def _exercise(config: Path, era: str) -> None:
    progress: list[float] = []
    asked: list[dict] = []

    def on_elicitation(params: dict) -> dict:
        asked.append(params)
        return {"action": "accept", "content": {"ok": True}}

    async with mc.connect(gateway_argv(config), mode=era, on_elicitation=on_elicitation) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
        shout = tools["ts_shout"]
        assert shout["annotations"] == {"readOnlyHint": True}
        assert shout["inputSchema"]["properties"]["text"]["description"] == "What to shout"
        if era == "handshake":  # titles and _meta exist from 2025-06-18 on
            assert shout["_meta"] == {"example.com/origin": "ts"} and shout["title"] == "Shout"
        assert (await client.call_tool("ts_shout", {"text": "hey"})).text == "HEY"
        steps = await client.call_tool("ts_steps", {"n": 3}, progress=lambda p, t, m: progress.append(p))
        assert steps.text == "did 3 steps" and progress == [1, 2, 3]
        assert (await client.read_resource("ts://motd"))[0]["text"] == "Hello from TypeScript"
        prompt = await client.get_prompt("ts_haiku", {"topic": "rivers"})
        assert "rivers" in prompt["messages"][0]["content"]["text"]
        # the upstream's live elicitation reaches our client: as a live request in the handshake
        # era; in the stateless era as an InputRequiredResult, the upstream call parked meanwhile
        confirmed = await client.call_tool("ts_confirm", {})
        assert confirmed.text == "action=accept ok=true" and asked[0]["message"] == "Go ahead?"


@pytest.mark.parametrize("era", ["handshake", "stateless"])
async def test_ts_sdk_upstream_over_stdio(tmp_path, era: str) -> None:
    config = write_config(tmp_path / "gw.toml", {"ts": {"command": [NODE, str(TS / "server.mjs"), "stdio"]}})
    await _exercise(config, era)


async def test_ts_sdk_upstream_over_http(tmp_path) -> None:
    port = free_port()
    with Process([NODE, str(TS / "server.mjs"), "http", str(port)], port) as upstream:
        config = write_config(tmp_path / "gw.toml", {"ts": {"url": upstream.url}})
        await _exercise(config, "handshake")

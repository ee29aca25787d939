"""The gateway end to end: upstreams nobody here wrote (the official Python SDK over stdio and
Streamable HTTP), mcpkit's conformance fixture over stdio, served through `mcpkit serve` to
mcpkit.client and the official SDK client, in both eras."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess

import pytest
import trio

import mcpkit.client as mc

from .gateway_helpers import (
    MCPKIT, Process, conformance_fixture, free_port, gateway_argv, healthz, sdk_http, sdk_stdio, write_config,
)

ERAS = ["handshake", "stateless"]


async def _direct_tools(target: list[str] | str) -> dict[str, dict]:
    async with mc.connect(target, mode="handshake", server_stderr=subprocess.DEVNULL) as client:
        return {t["name"]: t for t in await client.list_tools()}


@pytest.mark.parametrize("era", ERAS)
async def test_sdk_upstream_over_stdio(tmp_path, era: str) -> None:
    """The official SDK's server as a stdio upstream: definitions intact under the default
    prefix, calls, structured output, errors, progress and elicitation relayed, both eras."""
    config = write_config(tmp_path / "gw.toml", {"sdk": sdk_stdio()})
    direct = await _direct_tools(sdk_stdio()["command"])
    progress: list[float] = []
    asked: list[dict] = []

    def on_elicitation(params: dict) -> dict:
        asked.append(params)
        return {"action": "accept", "content": {"name": "Ada"}}

    async with mc.connect(gateway_argv(config), mode=era, on_elicitation=on_elicitation) as client:
        tools = {t["name"]: t for t in await client.list_tools()}
        assert set(tools) == {f"sdk_{name}" for name in direct}
        for name, definition in direct.items():  # schemas, annotations, _meta: as the upstream listed them
            served = dict(tools[f"sdk_{name}"], name=name)
            assert served == definition
        greet = await client.call_tool("sdk_greet", {"name": "Grace", "excited": True})
        assert greet.text == "Hello, Grace!" and not greet.is_error
        weather = await client.call_tool("sdk_weather", {"city": "Lima"})
        assert weather.structured == {"city": "Lima", "temperature_c": 21.5}
        boom = await client.call_tool("sdk_explode", {"message": "nope"})
        assert boom.is_error and "nope" in boom.text
        counted = await client.call_tool("sdk_count", {"to": 3}, progress=lambda p, t, m: progress.append(p))
        assert counted.text == "Counted to 3." and progress == [1, 2, 3]
        named = await client.call_tool("sdk_ask_name", {})
        assert named.text == "Hello, Ada!" and asked and "name" in json.dumps(asked[0])


async def test_sdk_upstream_over_http_with_list_changed(tmp_path) -> None:
    """An SDK server on Streamable HTTP given with --upstream NAME=URL (prefix from the file:
    none); its tools/list_changed reaches our handshake-era client as our own."""
    port = free_port()
    with sdk_http(port) as upstream:
        config = write_config(tmp_path / "gw.toml", {"web": {"url": upstream.url, "prefix": ""}})
        seen: list[str] = []
        async with mc.connect(gateway_argv(config, "--upstream", f"web={upstream.url}"), mode="handshake",
                              on_notification=lambda method, params: seen.append(method)) as client:
            names = {t["name"] for t in await client.list_tools()}
            assert {"greet", "count", "change_tools"} <= names
            assert (await client.call_tool("greet", {"name": "HTTP"})).text == "Hello, HTTP."
            await client.call_tool("change_tools", {})
            with trio.fail_after(10):
                while "notifications/tools/list_changed" not in seen:
                    await trio.sleep(0.05)


async def test_conformance_fixture_multi_round_input_stateless(tmp_path) -> None:
    """mcpkit's fixture (stateless upstream) to a stateless client: each round's input request
    reaches the client and the upstream's requestState goes back sealed inside ours."""
    config = write_config(tmp_path / "gw.toml", {"fix": conformance_fixture(prefix="")})
    answers = iter([{"action": "accept", "content": {"name": "Alice"}}, {"action": "accept", "content": {"color": "blue"}}])
    async with mc.connect(gateway_argv(config), mode="stateless", on_elicitation=lambda params: next(answers)) as client:
        result = await client.call_tool("test_input_required_result_multi_round", {})
        assert result.text == "Hello, Alice! Your favorite color is blue."
        resources = {r["uri"] for r in await client.list_resources()}
        assert "test://static-text" in resources
        contents = await client.read_resource("test://template/123/data")
        assert contents and "123" in contents[0]["text"]
        prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        assert "arg1='a'" in json.dumps(prompt)
        values = await client.complete({"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "arg1", "t")
        assert isinstance(values, list)


async def test_missing_capability_passes_through(tmp_path) -> None:
    """The upstream's -32021 (the caller did not declare sampling) comes back as the same error."""
    config = write_config(tmp_path / "gw.toml", {"fix": conformance_fixture(prefix="")})
    async with mc.connect(gateway_argv(config), mode="stateless") as client:
        with pytest.raises(mc.MissingCapability) as err:
            await client.call_tool("test_missing_capability", {})
        assert err.value.data == {"requiredCapabilities": {"sampling": {}}}


def test_official_sdk_client_downstream_both_eras(tmp_path) -> None:
    """The official SDK client (nobody here wrote it) talks to the gateway over stdio."""
    from mcp import Client, StdioServerParameters

    config = write_config(tmp_path / "gw.toml", {"sdk": sdk_stdio(prefix="up")})
    params = StdioServerParameters(command=MCPKIT, args=gateway_argv(config)[1:], env=dict(os.environ))

    async def run(mode: str) -> tuple[str, list[str], str, list[float]]:
        progress: list[float] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append(p)

        async with Client(params, mode=mode) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            greet = await client.call_tool("up_greet", {"name": "SDK"})
            await client.call_tool("up_count", {"to": 2}, progress_callback=on_progress)
            return client.protocol_version, names, greet.content[0].text, progress

    for mode, version in (("auto", "2026-07-28"), ("legacy", "2025-11-25")):
        got_version, names, text, progress = asyncio.run(run(mode))
        assert got_version == version and "up_greet" in names and text == "Hello, SDK."
        assert progress == [1, 2]


async def test_filters_rename_and_plugin_selection(tmp_path) -> None:
    """tools / exclude_tools filter, rename wins over the prefix, --disable leaves one out,
    and `mcpkit plugins` shows each upstream's state."""
    config = write_config(tmp_path / "gw.toml", {
        "a": sdk_stdio(tools=["greet", "count"], rename={"count": "tally"}),
        "b": sdk_stdio(exclude_tools=["explode", "ask_name", "change_tools", "weather", "count"], prefix="bee"),
    })
    async with mc.connect(gateway_argv(config), mode="handshake") as client:
        assert {t["name"] for t in await client.list_tools()} == {"a_greet", "tally", "bee_greet"}
        assert (await client.call_tool("tally", {"to": 1})).text == "Counted to 1."
    async with mc.connect(gateway_argv(config, "--plugin", "b"), mode="handshake") as client:
        assert {t["name"] for t in await client.list_tools()} == {"bee_greet"}
    out = subprocess.run([MCPKIT, "plugins", "--json", "--config", str(config), "--plugin", "a"],
                         capture_output=True, text=True, timeout=60)
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert set(rows) == {"a"} and rows["a"]["upstream"]["state"] == "connected"
    assert rows["a"]["tools"] == ["a_greet", "tally"]


def test_http_gateway_healthz_and_secret_headers(tmp_path) -> None:
    """An upstream that wants a bearer token gets it from ${ENV} in headers; /healthz reports
    each upstream (the wrong token: retrying, with the 401); the token is never logged."""
    up_port, gw_port = free_port(), free_port()
    secret = "s3cret-token-for-the-gateway-test"
    with Process([MCPKIT, "serve", "--transport", "http", "--port", str(up_port), "--plugin", "hello",
                  "--auth-token", secret], up_port) as upstream:
        config = write_config(tmp_path / "gw.toml", {
            "good": {"url": upstream.url, "headers": {"Authorization": "Bearer ${GW_TEST_TOKEN}"}},
            "bad": {"url": upstream.url, "headers": {"Authorization": "Bearer wrong"}, "prefix": "bad"},
        })
        log = tmp_path / "gw.log"
        with open(log, "wb") as err, Process(gateway_argv(config, "--transport", "http", "--port", str(gw_port),
                                                          "--plugin", "good", "--plugin", "bad"), gw_port, stderr=err,
                                             env={"GW_TEST_TOKEN": secret, "MCPKIT_LOG_LEVEL": "debug"}) as gw:
            health = healthz(gw.port)
            assert health["upstreams"]["good"]["state"] == "connected"
            assert health["upstreams"]["bad"]["state"] == "retrying" and "401" in health["upstreams"]["bad"]["error"]
            assert health["status"] == "degraded"

            async def call() -> str:
                async with mc.connect(gw.url) as client:
                    return (await client.call_tool("good_greet", {"name": "Ada"})).text

            assert trio.run(call).startswith("Hello, Ada")
        assert secret.encode() not in log.read_bytes()


def test_config_mistakes_are_one_line(tmp_path) -> None:
    for table, message in (
        ({"url": "ftp://x"}, "url must be an http:// or https:// URL"),
        ({"command": ["x"], "url": "http://x"}, "exactly one of command"),
        ({"url": "http://127.0.0.1:9/mcp", "headers": {"A": "${GW_NOT_SET_ANYWHERE}"}}, "GW_NOT_SET_ANYWHERE, which is not set"),
        ({"command": ["x"], "colour": 1}, "unknown key 'colour'"),
    ):
        config = write_config(tmp_path / "bad.toml", {"u": table})
        out = subprocess.run([MCPKIT, "serve", "--config", str(config)], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
        assert out.returncode != 0 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
    out = subprocess.run([MCPKIT, "serve", "--upstream", "x=/bin/cat"], capture_output=True, text=True, timeout=30,
                         stdin=subprocess.DEVNULL)
    assert out.returncode != 0 and "only URLs go on the command line" in out.stderr


def test_per_upstream_scopes_decide_who_sees_what(tmp_path) -> None:
    """Downstream authorization: an upstream's `scopes` hide its tools from principals without
    them, and calling one anyway is refused (403 step-up), while another upstream's are served."""
    port = free_port()
    config = write_config(tmp_path / "gw.toml", {
        "open": sdk_stdio(scopes=["docs"], tools=["greet"]),
        "closed": sdk_stdio(scopes=["admin"], tools=["greet"]),
    }, server={"auth": {"verifier": "static", "token": "team-token", "token_scopes": ["docs"]}})
    with Process(gateway_argv(config, "--transport", "http", "--port", str(port)), port) as gw:
        async def run() -> tuple[set[str], str, Exception | None]:
            async with mc.connect(gw.url, auth_token="team-token") as client:
                names = {t["name"] for t in await client.list_tools()}
                text = (await client.call_tool("open_greet", {"name": "Ada"})).text
                try:
                    await client.call_tool("closed_greet", {"name": "Ada"}, validate=False)
                    refused = None
                except mc.McpError as exc:
                    refused = exc
                return names, text, refused

        names, text, refused = trio.run(run)
    assert names == {"open_greet"} and text == "Hello, Ada."
    assert refused is not None and refused.http_status == 403


@pytest.mark.parametrize("era", ERAS)
async def test_upstream_log_messages_reach_the_caller_before_its_answer(tmp_path, era: str) -> None:
    """The fixture's three log messages, sent before its answer, are relayed to the caller and
    arrive before that answer (not to mcpkit's own log after the call has left)."""
    config = write_config(tmp_path / "gw.toml", {"fix": conformance_fixture(prefix="")})
    for _ in range(3):
        logs: list[dict] = []
        async with mc.connect(gateway_argv(config), mode=era, log_level="debug", on_log=logs.append) as client:
            result = await client.call_tool("test_tool_with_logging", {})
            await client.session.drain()  # our own client's callbacks, queued before the answer
            seen = [entry.get("data") for entry in logs]
        assert result.text == "Tool with logging executed successfully"
        assert seen == ["Tool execution started", "Tool processing data", "Tool execution completed"]

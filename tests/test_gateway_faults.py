"""Failure isolation: an upstream that crashes, hangs, writes garbage, sends oversized or too
many messages, or exits at start never blocks or crashes the gateway or the other plugins; its
calls answer isError within the deadline, the child is reaped, and it recovers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import trio

import mcpkit.client as mc

from .gateway_helpers import MCPKIT, children_of, zombies_of, faulty, gateway_argv, sdk_stdio, write_config


def _gateway_pid(client: mc.Client) -> int:
    transport = client.session.transport  # type: ignore[union-attr]
    return transport._proc.pid  # the `mcpkit serve` we started


async def _wait_for(cond, timeout: float = 15.0) -> None:
    with trio.fail_after(timeout):
        while not await cond():
            await trio.sleep(0.05)


async def test_kill_9_mid_call_answers_at_once_and_recovers(tmp_path) -> None:
    config = write_config(tmp_path / "gw.toml", {"bad": faulty("ok", backoff=0.1), "sdk": sdk_stdio()})
    async with mc.connect(gateway_argv(config), mode="handshake") as client:
        first = int((await client.call_tool("bad_pid", {})).text)
        assert first in children_of(_gateway_pid(client))
        result: list[mc.CallResult] = []

        async def slow() -> None:
            result.append(await client.call_tool("bad_sleep", {"seconds": 30}))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow)
            await trio.sleep(0.5)
            started = time.monotonic()
            os.kill(first, signal.SIGKILL)
        assert time.monotonic() - started < 5
        assert result[0].is_error and "upstream bad" in result[0].text
        # the other upstream never noticed
        assert (await client.call_tool("sdk_greet", {"name": "still"})).text == "Hello, still."

        async def recovered() -> bool:
            answer = await client.call_tool("bad_pid", {})
            return not answer.is_error and int(answer.text) != first

        await _wait_for(recovered)
        assert first not in children_of(_gateway_pid(client))  # the killed child was reaped
        assert not zombies_of(_gateway_pid(client))


async def test_upstream_that_never_answers_times_out_and_is_restarted(tmp_path) -> None:
    config = write_config(tmp_path / "gw.toml", {"hang": faulty("hang", timeout=1, backoff=0.1)})
    async with mc.connect(gateway_argv(config), mode="handshake") as client:
        pid = int(children_of(_gateway_pid(client))[0])
        started = time.monotonic()
        answer = await client.call_tool("hang_echo", {"text": "hi"})
        assert answer.is_error and "timed out" in answer.text
        assert time.monotonic() - started < 4

        async def restarted() -> bool:  # the probe's ping went unanswered: a fresh process
            return pid not in children_of(_gateway_pid(client)) and bool(children_of(_gateway_pid(client)))

        await _wait_for(restarted, 20)


async def test_garbage_oversize_and_exit_at_start_are_reported_not_fatal(tmp_path) -> None:
    config = write_config(tmp_path / "gw.toml", {
        "junk": faulty("garbage", connect_timeout=2, backoff=5), "dead": faulty("exit", backoff=5),
        "big": faulty("oversize", max_message_bytes=1024 * 1024, backoff=0.1), "sdk": sdk_stdio(),
    })
    async with mc.connect(gateway_argv(config), mode="handshake") as client:
        names = {t["name"] for t in await client.list_tools()}
        assert "sdk_greet" in names and not any(n.startswith(("junk_", "dead_")) for n in names)
        started = time.monotonic()
        answer = await client.call_tool("big_echo", {"text": "x"})
        assert answer.is_error and "upstream big" in answer.text and time.monotonic() - started < 5
        assert (await client.call_tool("sdk_greet", {"name": "ok"})).text == "Hello, ok."
    out = subprocess.run([MCPKIT, "plugins", "--json", "--config", str(config), "--plugin", "junk", "--plugin", "dead"],
                         capture_output=True, text=True, timeout=60)
    rows = {r["name"]: r["upstream"] for r in json.loads(out.stdout)}
    assert rows["dead"]["state"] == "failed" and "exited (code 3)" in rows["dead"]["error"]
    assert rows["junk"]["state"] == "failed" and "not JSON" in rows["junk"]["error"]


async def test_flooding_upstream_stays_bounded(tmp_path) -> None:
    config = write_config(tmp_path / "gw.toml", {"flood": faulty("flood")})
    async with mc.connect(gateway_argv(config), mode="handshake", log_level="debug") as client:
        answer = await client.call_tool("flood_echo", {"text": "done"}, timeout=60)
        assert answer.text == "done"
        with open(f"/proc/{_gateway_pid(client)}/status") as status:
            rss_kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
        assert rss_kib < 200 * 1024

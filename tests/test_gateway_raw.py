"""A forwarded call's result passed on as the upstream's bytes, and the stdio pipe moved with
non-blocking reads and writes (issue 24's per-call cost work).

End to end through `mcpkit serve` with a real stdio upstream (tests/faulty_upstream.py), both
eras downstream and an old revision; the pieces on their own on real bytes and real pipes."""

from __future__ import annotations

import os
import subprocess

import msgspec
import pytest
import trio

import mcpkit.client as mc
from mcpkit.client.errors import RpcError
from mcpkit.client.transports._pipe import PipeClosed, PipeReader, PipeWriter
from mcpkit.gateway.relay import call_result
from mcpkit.protocol import jsonrpc

from .gateway_helpers import faulty, gateway_argv, write_config

RICH_STRUCTURED = {"n": 1.5, "l": [True, None]}
RICH_CONTENT = [{"type": "text", "text": 'café "q"'}, {"type": "resource_link", "uri": "file:///r.txt", "name": "r"}]


@pytest.mark.parametrize("era", ["handshake", "stateless"])
async def test_rich_result_error_answer_and_oversize_through_the_gateway(tmp_path, era: str) -> None:
    config = write_config(tmp_path / "gw.toml", {
        "up": faulty("ok"), "big": faulty("oversize", max_message_bytes=256 * 1024, backoff=0.1),
    })
    async with mc.connect(gateway_argv(config), mode=era, server_stderr=subprocess.DEVNULL) as client:
        rich = await client.call_tool("up_rich", {})
        assert rich.is_error is True and rich.content == RICH_CONTENT and rich.structured == RICH_STRUCTURED
        assert rich.raw["example.com/extra"] == {"kept": 1}  # members nobody knows pass through
        meta = rich.raw["_meta"]
        assert meta["example.com/trace"] == "abc"
        # the upstream's server info is not ours to pass on: ours replaces it (stateless era)
        assert meta.get("io.modelcontextprotocol/serverInfo", {}).get("name") != "x"
        assert (era == "stateless") == ("io.modelcontextprotocol/serverInfo" in meta)
        odd = await client.call_tool("up_badmeta", {})  # a _meta the schema forbids: dropped, the rest served
        assert odd.text == "odd" and not odd.is_error
        assert not isinstance(odd.raw.get("_meta", {}), list)
        with pytest.raises(RpcError) as refused:
            await client.call_tool("up_refuse", {})
        assert refused.value.rpc_code == -32602 and refused.value.message == "no, thanks"
        assert refused.value.data == {"why": "test"}
        big = await client.call_tool("big_echo", {"text": "x"})  # a 2 MiB line over the 256 KiB limit
        assert big.is_error and "upstream big" in big.text, big.text  # refused unread: the session restarts
        assert "over the limit of 262144" in big.text, big.text  # and the caller is told why
        async with trio.open_nursery() as nursery:  # calls in flight together: each gets its own answer
            got: dict[int, str] = {}

            async def one(i: int) -> None:
                got[i] = (await client.call_tool("up_echo", {"text": f"n{i}" * (i * 500)})).text

            for i in range(20):
                nursery.start_soon(one, i)
        assert got == {i: f"n{i}" * (i * 500) for i in range(20)}


async def test_an_older_revision_downstream_gets_what_it_can_carry(tmp_path) -> None:
    config = write_config(tmp_path / "gw.toml", {"up": faulty("ok")})
    async with mc.connect(gateway_argv(config), protocol_version="2025-03-26", server_stderr=subprocess.DEVNULL) as client:
        rich = await client.call_tool("up_rich", {})
    assert rich.is_error is True and "structuredContent" not in rich.raw
    assert rich.content == [RICH_CONTENT[0], {"type": "text", "text": "Resource: file:///r.txt"}]


# -- call_result on the upstream's bytes -----------------------------------------------------------
UPSTREAM = (b'{"content": [ {"type":"text","text":"caf\\u00e9"} ], "structuredContent": {"a": [1, 2.50, null]},'
            b' "isError": false, "resultType": "complete", "ttlMs": 5,'
            b' "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "up"}, "example.com/k": [1]}}')


def _members(data: bytes) -> dict[str, msgspec.Raw]:
    return msgspec.json.decode(data, type=dict[str, msgspec.Raw])


def test_call_result_keeps_content_and_structured_content_as_bytes() -> None:
    out = call_result(_members(UPSTREAM), "2026-07-28")
    assert bytes(out["content"]) == b'[ {"type":"text","text":"caf\\u00e9"} ]'  # exactly as it came
    assert bytes(out["structuredContent"]) == b'{"a": [1, 2.50, null]}'
    assert out["isError"] is False  # a bool the observers can read, not bytes (which are truthy)
    assert jsonrpc.to_plain(out["_meta"]) == {"example.com/k": [1]}  # the upstream's server info out, the rest intact
    assert "resultType" not in out and "ttlMs" not in out
    wire = jsonrpc.Answer(1, out).encode()
    assert msgspec.json.decode(wire)["result"] == {
        "content": [{"type": "text", "text": "café"}], "structuredContent": {"a": [1, 2.5, None]},
        "isError": False, "_meta": {"example.com/k": [1]}}
    assert jsonrpc.to_plain(out)["content"] == [{"type": "text", "text": "café"}]


def test_call_result_shapes_bytes_for_older_revisions_and_odd_members() -> None:
    old = call_result(_members(b'{"content": [{"type": "audio", "data": "AA==", "mimeType": "audio/wav"}],'
                               b' "structuredContent": {"a": 1}, "isError": true}'), "2024-11-05")
    assert old["content"] == [{"type": "text", "text": "[audio content (audio/wav) not supported by protocol 2024-11-05]"}]
    assert "structuredContent" not in old and old["isError"] is True
    odd = call_result(_members(b'{"content": {"not": "a list"}, "_meta": {"io.modelcontextprotocol/serverInfo": {}}}'),
                      "2026-07-28")
    assert odd == {"content": [], "isError": False}  # no content list: none; an emptied _meta: gone


# -- the pipe ------------------------------------------------------------------------------------
async def _drain(reader: PipeReader, into: bytearray, until: int, slow: bool = False) -> None:
    while len(into) < until:
        chunk = await reader.read()
        if not chunk:
            return
        into += chunk
        if slow:
            await trio.sleep(0.001)


def _pipe() -> tuple[int, int]:
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    return r, w


async def test_pipe_writers_never_interleave_frames_when_the_pipe_is_full() -> None:
    r, w = _pipe()
    try:
        writer, reader = PipeWriter(w), PipeReader(r)
        frames = [bytes([65 + i]) * (100_000 + i) + b"\n" for i in range(12)]  # each over the pipe's buffer
        got = bytearray()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, reader, got, sum(map(len, frames)), True)
            async with trio.open_nursery() as writers:
                for frame in frames:
                    writers.start_soon(writer.write, frame)
        lines = bytes(got).split(b"\n")[:-1]
        assert sorted(lines) == sorted(f[:-1] for f in frames)  # whole frames, none mixed with another
        assert all(len(set(line)) == 1 for line in lines)
    finally:
        os.close(r)
        os.close(w)


async def test_a_frame_half_written_when_its_writer_is_cancelled_is_finished_first() -> None:
    r, w = _pipe()
    try:
        writer, reader = PipeWriter(w), PipeReader(r)
        first = b"a" * 300_000 + b"\n"
        with trio.move_on_after(0.05):
            await writer.write(first)  # nobody reads: the pipe fills, the write waits, and is cancelled
        got = bytearray()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, reader, got, len(first) + 4)
            await writer.write(b"bcd\n")
        assert bytes(got) == first + b"bcd\n"
    finally:
        os.close(r)
        os.close(w)


async def test_pipe_closed_ends_are_reported_and_never_touched_after_close() -> None:
    r, w = _pipe()
    writer, reader = PipeWriter(w), PipeReader(r)
    await writer.write(b"x\n")
    assert await reader.read() == b"x\n"
    os.close(r)
    with pytest.raises(PipeClosed):  # the reading end is gone (EPIPE)
        await writer.write(b"y\n")
    with pytest.raises(PipeClosed):  # and stays so
        await writer.write(b"z\n")
    os.close(w)
    r2, w2 = _pipe()
    try:
        writer2, reader2 = PipeWriter(w2), PipeReader(r2)
        writer2.close()
        reader2.closed = True
        with pytest.raises(PipeClosed):
            await writer2.write(b"never\n")
        os.write(w2, b"data\n")
        assert await reader2.read() == b""  # closed: the fd is not read again
    finally:
        os.close(r2)
        os.close(w2)

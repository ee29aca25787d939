"""mcpkit's HTTP client (mcpkit.http_client) against real servers on loopback.

Each test runs a small scripted HTTP server in the same trio run (real sockets, real bytes,
whatever framing or misbehaviour the test needs) and checks what the client sent and what it
made of the answer: keep-alive reuse, servers that close idle connections, chunked and
close-delimited bodies, deadlines, size limits, streaming, connection limits, redirects,
header injection and TLS.
"""

from __future__ import annotations

import json
import ssl
import subprocess
from pathlib import Path

import pytest
import trio

import mcpkit
from mcpkit.httpclient import HttpConnectError, HttpProtocolError, HttpResponseTooLarge, HttpStatusError, HttpTimeout

from .scripted_http import Seen, answer, read_request, scripted

async def keep_answering(stream: trio.abc.Stream, seen: Seen) -> None:
    """Echo each request back as JSON, keeping the connection open."""
    buf = bytearray()
    while (req := await read_request(stream, buf, seen)) is not None:
        line, headers, body = req
        await stream.send_all(answer(json.dumps({"line": line, "headers": headers, "body": body.decode()})))


async def test_json_both_ways_params_and_one_kept_alive_connection() -> None:
    async with scripted(keep_answering) as (url, seen), mcpkit.http_client(url + "/api", headers={"X-Key": "k1"}) as http:
        r = await http.get("/items", params={"q": "a b", "n": 3, "on": True, "skip": None})
        assert r.status_code == 200 and r.is_success and r.headers["content-type"] == "application/json"
        echoed = r.json()
        assert echoed["line"] == "GET /api/items?q=a%20b&n=3&on=true HTTP/1.1"
        assert echoed["headers"]["x-key"] == "k1" and echoed["headers"]["host"] == url.split("//")[1]
        r = await http.post("items", json={"name": "é", "n": [1, 2]}, headers={"x-key": "k2"})
        echoed = r.json()
        assert echoed["line"] == "POST /api/items HTTP/1.1" and echoed["headers"]["x-key"] == "k2"
        assert echoed["headers"]["content-type"] == "application/json"
        assert json.loads(echoed["body"]) == {"name": "é", "n": [1, 2]}
        r = await http.post(url + "/form", data={"grant_type": "x y"})
        assert r.json()["body"] == "grant_type=x%20y"
        assert r.json()["headers"]["content-type"] == "application/x-www-form-urlencoded"
        assert seen.connections == 1  # every request on the same connection


async def test_a_connection_the_server_closed_while_idle_is_not_used() -> None:
    async def one_answer_then_close(stream: trio.abc.Stream, seen: Seen) -> None:
        buf = bytearray()
        if await read_request(stream, buf, seen) is not None:
            await stream.send_all(answer("{}"))  # keep-alive as far as the client can tell

    async with scripted(one_answer_then_close) as (url, seen), mcpkit.http_client(url) as http:
        for _ in range(3):
            assert (await http.post("/x", json={})).status_code == 200
            await trio.sleep(0.05)  # the server's close reaches the client's idle socket
        assert seen.connections == 3


async def test_a_close_as_the_request_goes_out_is_retried_once_for_get_never_for_post() -> None:
    async def answer_then_drop_the_next(stream: trio.abc.Stream, seen: Seen) -> None:
        buf = bytearray()
        if await read_request(stream, buf, seen) is not None:
            await stream.send_all(answer("{}"))
        await read_request(stream, buf, seen)  # read the second request, close without a word

    async with scripted(answer_then_drop_the_next) as (url, seen):
        async with mcpkit.http_client(url) as http:
            await http.get("/a")
            assert (await http.get("/b")).status_code == 200  # retried on a new connection
            assert [line for line, _, _ in seen.requests] == ["GET /a HTTP/1.1", "GET /b HTTP/1.1", "GET /b HTTP/1.1"]
        async with mcpkit.http_client(url) as http:
            await http.post("/c")
            with pytest.raises(HttpProtocolError, match="closed the connection"):
                await http.post("/d")  # the server may have acted on it: not sent twice
            assert [line for line, _, _ in seen.requests][-2:] == ["POST /c HTTP/1.1", "POST /d HTTP/1.1"]


async def test_chunked_and_close_delimited_bodies() -> None:
    async def chunked_then_unframed(stream: trio.abc.Stream, seen: Seen) -> None:
        buf = bytearray()
        await read_request(stream, buf, seen)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await trio.sleep(0.02)
        await stream.send_all(b"6\r\n world\r\n0\r\n\r\n")
        await read_request(stream, buf, seen)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")

    async with scripted(chunked_then_unframed) as (url, seen), mcpkit.http_client(url) as http:
        assert (await http.get("/1")).text == "hello world"
        r = await http.get("/2")
        assert r.content == b"until the end" and seen.connections == 1
        assert http._open == 0  # a connection the server ends is not kept


async def test_a_body_cut_short_is_an_error_not_a_short_answer() -> None:
    async def short(stream: trio.abc.Stream, seen: Seen) -> None:
        await read_request(stream, bytearray(), seen)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")

    async with scripted(short) as (url, _), mcpkit.http_client(url) as http:
        with pytest.raises(HttpProtocolError, match="before the answer was complete"):
            await http.get("/")


async def test_the_deadline_covers_the_whole_request_and_drops_the_connection() -> None:
    async def slow(stream: trio.abc.Stream, seen: Seen) -> None:
        buf = bytearray()
        while await read_request(stream, buf, seen) is not None:
            await trio.sleep(0.5 if len(seen.requests) == 1 else 0)
            await stream.send_all(answer("{}"))

    async with scripted(slow) as (url, seen), mcpkit.http_client(url, timeout=0.1) as http:
        with pytest.raises(HttpTimeout, match=r"GET .*/slow took more than 0.1 s") as info:
            await http.get("/slow")
        assert isinstance(info.value, mcpkit.HttpClientError)
        assert http._open == 0  # the half-read connection is closed, not pooled
        assert (await http.get("/fast", timeout=5)).status_code == 200
        assert seen.connections == 2


async def test_answers_larger_than_the_limit_are_refused_but_can_be_streamed() -> None:
    big = b"x" * 300_000

    async def large(stream: trio.abc.Stream, seen: Seen) -> None:
        buf = bytearray()
        while await read_request(stream, buf, seen) is not None:
            await stream.send_all(answer(big, ctype="text/plain"))

    async with scripted(large) as (url, _), mcpkit.http_client(url, max_response_size=100_000) as http:
        with pytest.raises(HttpResponseTooLarge, match="max_response_size"):
            await http.get("/big")
        async with http.stream("GET", "/big") as r:
            got = [chunk async for chunk in r.aiter_bytes()]
        assert b"".join(got) == big
        assert http._open == 1 and len(http._idle[next(iter(http._idle))]) == 1  # streamed to the end: kept


async def test_a_stream_yields_pieces_as_they_arrive() -> None:
    async def sse(stream: trio.abc.Stream, seen: Seen) -> None:
        await read_request(stream, bytearray(), seen)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for i in range(3):
            event = f"data: {i}\n\n".encode()
            await stream.send_all(b"%x\r\n%s\r\n" % (len(event), event))
            await trio.sleep(0.05)
        await stream.send_all(b"0\r\n\r\n")

    async with scripted(sse) as (url, _), mcpkit.http_client(url) as http:
        async with http.stream("POST", "/mcp", json={"jsonrpc": "2.0"}) as r:
            assert r.headers["content-type"] == "text/event-stream"
            pieces = []
            async for chunk in r.aiter_bytes():
                pieces.append((chunk, trio.current_time()))
        assert [p for p, _ in pieces] == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n"]
        assert pieces[2][1] - pieces[0][1] > 0.08  # read as they came, not at the end


async def test_connections_are_bounded_and_waiters_get_them_in_turn() -> None:
    async def slow_echo(stream: trio.abc.Stream, seen: Seen) -> None:
        buf = bytearray()
        while await read_request(stream, buf, seen) is not None:
            await trio.sleep(0.05)
            await stream.send_all(answer("{}"))

    async with scripted(slow_echo) as (url, seen), mcpkit.http_client(url, max_connections=2) as http:
        async with trio.open_nursery() as nursery:
            for i in range(6):
                nursery.start_soon(http.get, f"/{i}")
        assert len(seen.requests) == 6 and seen.most_open <= 2 and http._open <= 2


async def test_cancelling_a_request_closes_its_connection() -> None:
    async def never(stream: trio.abc.Stream, seen: Seen) -> None:
        await read_request(stream, bytearray(), seen)
        while await stream.receive_some(1024):  # no answer; wait for the client to hang up
            pass

    async with scripted(never) as (url, seen), mcpkit.http_client(url) as http:
        with trio.move_on_after(0.1):
            await http.get("/")
        assert http._open == 0 and not http._idle.get(next(iter(http._idle), None) or ("", "", 0))
        await trio.sleep(0.05)
        assert seen.open_now == 0  # the server saw the connection close


async def test_redirects_are_followed_only_when_asked_and_credentials_stay_home() -> None:
    async def other(stream: trio.abc.Stream, seen: Seen) -> None:
        await keep_answering(stream, seen)

    async with scripted(other) as (other_url, other_seen):
        async def redirecting(stream: trio.abc.Stream, seen: Seen) -> None:
            buf = bytearray()
            while (req := await read_request(stream, buf, seen)) is not None:
                target = req[0].split()[1]
                where = {"/away": other_url + "/there", "/post": "/landing"}.get(target)
                if where:
                    await stream.send_all(answer("", "303 See Other" if target == "/post" else "302 Found",
                                                 extra=f"Location: {where}\r\n"))
                else:
                    await stream.send_all(answer(json.dumps({"line": req[0], "auth": req[1].get("authorization")})))

        async with scripted(redirecting) as (url, seen):
            async with mcpkit.http_client(url) as http:
                r = await http.get("/away")
                assert r.status_code == 302 and r.headers["location"].endswith("/there")
            async with mcpkit.http_client(url, follow_redirects=True) as http:
                r = await http.post("/post", json={"a": 1}, headers={"Authorization": "Bearer t"})
                assert r.json() == {"line": "GET /landing HTTP/1.1", "auth": "Bearer t"}  # 303: GET, same origin
                r = await http.get("/away", headers={"Authorization": "Bearer t"})
                assert r.json()["line"] == "GET /there HTTP/1.1"
                assert "authorization" not in other_seen.requests[-1][1]  # not sent to another origin


async def test_status_errors_and_bad_input() -> None:
    async def not_found(stream: trio.abc.Stream, seen: Seen) -> None:
        buf = bytearray()
        while await read_request(stream, buf, seen) is not None:
            await stream.send_all(answer('{"error": "no"}', "404 Not Found"))

    async with scripted(not_found) as (url, seen), mcpkit.http_client(url) as http:
        r = await http.get("/missing")
        assert r.status_code == 404 and r.is_error and r.json() == {"error": "no"}
        with pytest.raises(HttpStatusError, match="client error 404 Not Found for GET .*/missing") as info:
            r.raise_for_status()
        assert info.value.response is r
        with pytest.raises(ValueError, match="line breaks"):
            await http.get("/", headers={"X-Evil": "a\r\nInjected: yes"})
        with pytest.raises(ValueError, match="base_url"):
            await mcpkit.http_client().get("/relative")
        with pytest.raises(ValueError, match="only http"):
            await http.get("ftp://example.com/")
        assert all("injected" not in h for _, h, _ in seen.requests)
    with pytest.raises(HttpConnectError, match="cannot connect"):
        await mcpkit.http_client(url).get("/")  # the server is gone
    closed = mcpkit.http_client(url)
    await closed.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await closed.get("/")


async def test_https_with_a_private_ca(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(str(cert), str(key))
    async with scripted(keep_answering, tls=server_ctx) as (url, seen):
        async with mcpkit.http_client(url, verify=str(cert)) as http:
            assert (await http.get("/a")).json()["line"] == "GET /a HTTP/1.1"
            assert (await http.get("/b")).status_code == 200
            assert seen.connections == 1  # kept alive over TLS
        async with mcpkit.http_client(url) as http:  # the system CAs do not know this one
            with pytest.raises(HttpConnectError, match="TLS handshake"):
                await http.get("/c")


async def test_a_connect_that_hangs_is_a_connect_timeout() -> None:
    """A listener whose accept queue is full drops new SYNs, so connecting hangs (loopback only)."""
    import socket
    import time

    from mcpkit.httpclient import HttpConnectTimeout

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(3):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            fillers.append(s)
        async with mcpkit.http_client(f"http://127.0.0.1:{port}", connect_timeout=0.3, timeout=5) as http:
            started = time.monotonic()
            with pytest.raises(HttpConnectTimeout, match="connecting to 127.0.0.1") as info:
                await http.get("/")
            assert 0.25 < time.monotonic() - started < 2
            assert isinstance(info.value, mcpkit.HttpTimeout) and http._open == 0
    finally:
        for s in fillers:
            s.close()
        listener.close()

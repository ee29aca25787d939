"""Issue 22, HTTP under hostile or vanished clients, against real servers on loopback: bodies
that trickle, GET streams whose client vanished without a FIN, sessions all held by streams,
stderr that nobody reads, and the smaller HTTP/1.1 points (Host, absolute form, transfer
codings, chunk extensions). Each test failed on the code before the fix."""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import socket
import subprocess
import threading
import time

import pytest

from mcpkit.server.settings import Settings

from .helpers import MCPKIT
from .http_helpers import ACCEPT, INIT, HttpServer, wait_until
from .raw_http import STATELESS_BODY, STATELESS_HEADERS, get, post_mcp, talk

TCP_REPAIR = getattr(socket, "TCP_REPAIR", 19)


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _slow_body_head(length: int = 100_000) -> bytes:
    return post_mcp(b"").split(b"Content-Length")[0] + b"Content-Length: %d\r\n\r\n" % length


# -- item 17: smaller HTTP/1.1 points --------------------------------------------------------------

@pytest.fixture(scope="module")
def srv():
    with HttpServer("--plugin", "hello", env={"MCPKIT_HTTP_SERVER": "mcpkit"}) as server:
        yield server


@pytest.mark.parametrize("raw, status", [
    (b"GET /healthz HTTP/1.1\r\n\r\n", 400),  # HTTP/1.1 without Host
    (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n\r\n", 400),  # two Host fields
    (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1 evil\r\n\r\n", 400),  # not a host
    (b"GET http://evil.example/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 421),  # the target's host counts
    (b"GET http://user@127.0.0.1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400),
    (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n", 501),
    (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501),
    (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400),
])
def test_host_and_transfer_coding_rules(srv: HttpServer, raw: bytes, status: int) -> None:
    ex = talk(srv.port, raw)
    assert [a.status for a in ex.answers] == [status]
    assert ex.answers[0].json()["error"]


def test_http10_without_host_is_still_served(srv: HttpServer) -> None:
    ex = talk(srv.port, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert [a.status for a in ex.answers] == [200]


def test_a_legitimate_absolute_form_request_is_served(srv: HttpServer) -> None:
    body = STATELESS_BODY
    raw = (b"POST http://127.0.0.1:%d/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" % srv.port + STATELESS_HEADERS
           + b"Content-Length: %d\r\n\r\n" % len(body) + body)
    ex = talk(srv.port, raw, expect=1)
    assert ex.answers[0].status == 200 and ex.answers[0].json()["result"]["content"][0]["text"] == "Hello, raw."
    ex = talk(srv.port, get(b"HTTP://localhost/healthz?x=1"), expect=1)
    assert ex.answers[0].status == 200 and ex.answers[0].json()["status"] == "ok"


def test_chunk_extensions_count_toward_a_limit(srv: HttpServer) -> None:
    """A chunk-size line whose extension runs on is refused once it passes max_header_bytes
    (32 KiB): 128 KiB of it get a 400 without the line ever ending."""
    head = post_mcp().split(b"Content-Length")[0] + b"Transfer-Encoding: chunked\r\n\r\n"
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
        sock.sendall(head + b"5;ext=" + b"a" * 128 * 1024)
        sock.settimeout(3)
        try:
            reply = sock.recv(4096)
        except socket.timeout:
            reply = b"(no answer)"
    assert reply.startswith(b"HTTP/1.1 400") and b"chunk framing" in reply, reply[:200]
    ok = head + b"%x;name=value\r\n%s\r\n0\r\n\r\n" % (len(STATELESS_BODY), STATELESS_BODY)
    assert talk(srv.port, ok, expect=1).answers[0].status == 200  # short extensions are fine


def test_trailer_fields_are_not_merged_into_the_request_headers(srv: HttpServer) -> None:
    head = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + STATELESS_HEADERS.replace(b"Mcp-Name: greet\r\n", b"")
            + b"Transfer-Encoding: chunked\r\n\r\n")
    body = b"%x\r\n%s\r\n0\r\nMcp-Name: greet\r\n\r\n" % (len(STATELESS_BODY), STATELESS_BODY)
    ex = talk(srv.port, head + body, expect=1)
    assert ex.answers[0].status == 400 and ex.answers[0].json()["error"]["code"] == -32020  # Mcp-Name is missing

"""Differential tests: the same raw request bytes, cut in two at every possible point, get the
same answers from mcpkit's server and from hypercorn (and the same as when sent whole).

Only what both servers are meant to agree on is compared: status, the body (JSON, with the
process id of /healthz left out) and the headers the application sets. Framing differences
(chunked or not, header order, Date, Server, request ids) are not the application's.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .http_helpers import HttpServer
from .raw_http import STATELESS_BODY, get, post_mcp, talk

COMPARED_HEADERS = ("content-type", "allow", "access-control-allow-origin", "access-control-allow-methods",
                    "access-control-expose-headers", "www-authenticate")

STREAMS: dict[str, tuple[bytes, int]] = {
    "healthz": (get(), 1),
    "stateless tools/call": (post_mcp(), 1),
    "chunked body": (post_mcp().split(b"Content-Length")[0] + b"Transfer-Encoding: chunked\r\n\r\n"
                     + b"%x\r\n%s\r\n0\r\n\r\n" % (len(STATELESS_BODY), STATELESS_BODY), 1),
    "preflight": (b"OPTIONS /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://localhost:3000\r\n"
                  b"Access-Control-Request-Method: POST\r\n\r\n", 1),
    "GET without a session": (get(b"/mcp", b"Accept: text/event-stream\r\n"), 1),
    "wrong content type": (post_mcp().replace(b"Content-Type: application/json", b"Content-Type: text/plain"), 1),
    "pipelined pair": (get() + post_mcp(), 2),
    "query string": (b"POST /messages?session_id=nope HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 2\r\n\r\n{}", 1),
}


@pytest.fixture(scope="module")
def servers():
    with HttpServer("--plugin", "hello", env={"MCPKIT_HTTP_SERVER": "mcpkit"}) as ours, \
            HttpServer("--plugin", "hello", env={"MCPKIT_HTTP_SERVER": "hypercorn"}) as theirs:
        yield ours, theirs


def _normal(answer: Any) -> tuple[Any, ...]:
    body: Any = answer.body
    if answer.headers.get("content-type", "").startswith("application/json") and body:
        body = json.loads(body)
        if isinstance(body, dict):
            body.pop("pid", None)
    headers = tuple((k, answer.headers.get(k)) for k in COMPARED_HEADERS)
    return answer.status, headers, body


def _answers(port: int, parts: tuple[bytes, ...], expect: int) -> list[tuple[Any, ...]]:
    ex = talk(port, *parts, pause=0.001, expect=expect, timeout=5)
    return [_normal(a) for a in ex.answers]


@pytest.mark.parametrize("name", list(STREAMS))
def test_both_servers_agree_at_every_split_point(servers: tuple[HttpServer, HttpServer], name: str) -> None:
    stream, expect = STREAMS[name]
    ours, theirs = servers
    whole = _answers(ours.port, (stream,), expect)
    assert len(whole) == expect and whole == _answers(theirs.port, (stream,), expect)
    for cut in range(1, len(stream)):
        parts = (stream[:cut], stream[cut:])
        assert _answers(ours.port, parts, expect) == whole, f"mcpkit differs when cut at {cut}"
    for cut in range(1, len(stream), 7):  # the reference server, at a sample of the same points
        assert _answers(theirs.port, (stream[:cut], stream[cut:]), expect) == whole, f"hypercorn differs at {cut}"

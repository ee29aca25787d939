"""HTTP/1.1 framing probes from issue 22 for the campaign's raw-socket worker: missing and
duplicate Host, targets in absolute form, transfer codings other than chunked alone, chunk
extensions and sizes that run on, bare CR, trailers naming fields the request must not take.
None may get a 5xx (but 503) or stall the server."""

from __future__ import annotations

_CHUNKED = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")

PROBES: list[bytes] = [
    b"GET /healthz HTTP/1.1\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1/../x\r\n\r\n",
    b"GET http://evil.example/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET http://127.0.0.1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET http://user:pw@127.0.0.1/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET https:///healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    _CHUNKED.replace(b"chunked", b"identity, chunked") + b"0\r\n\r\n",
    _CHUNKED.replace(b"chunked", b"gzip, chunked") + b"0\r\n\r\n",
    _CHUNKED.replace(b"chunked", b"chunked, chunked") + b"0\r\n\r\n",
    _CHUNKED + b"5;" + b"e" * 200_000 + b"\r\nhello\r\n0\r\n\r\n",
    _CHUNKED + b"ffffffffffffffffffff\r\nabc\r\n0\r\n\r\n",
    _CHUNKED + b"2\r\n{}\r\n0\r\nHost: evil.example\r\nContent-Length: 5\r\n\r\n",
    _CHUNKED + b"5\rhello\r\n0\r\n\r\n",
    b"GET /healthz HTTP/1.1\rHost: 127.0.0.1\r\r",
    b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\rX",
]

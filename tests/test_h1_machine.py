"""The HTTP/1.1 parser's own bookkeeping (mcpkit/transports/http/h1/_machine.py), fed bytes
directly: what the end-to-end tests in test_http11.py cannot see from outside."""

from __future__ import annotations

from mcpkit.transports.http.h1 import _machine
from mcpkit.transports.http.h1._machine import H1Connection, Limits


def _request(*fields: str) -> bytes:
    return ("POST /mcp HTTP/1.1\r\nHost: a.example\r\n" + "".join(f"{f}\r\n" for f in fields)
            + "Content-Length: 2\r\n\r\n{}").encode("latin-1")


def test_header_names_are_lower_cased_and_repeats_joined_on_every_request() -> None:
    h1 = H1Connection(Limits())
    for _ in range(3):  # the second and third requests find the names remembered
        h1.feed(_request("Content-Type: application/json", "X-Trace: a", "x-TRACE: b", "ACCEPT: */*"))
    assert h1.error is None and len(h1.ready) == 3
    for req in h1.ready:
        assert req.headers == {"host": "a.example", "content-type": "application/json", "x-trace": "a, b",
                               "accept": "*/*", "content-length": "2"}
        assert req.body == b"{}"


def test_remembered_header_names_are_bounded() -> None:
    h1 = H1Connection(Limits(max_headers=1000, max_header_bytes=1 << 20, max_pipelined=1000))
    for i in range(3):  # more distinct names than are ever kept
        h1.feed(_request(*(f"X-Made-Up-{i}-{n}: v" for n in range(_machine._NAMES_MAX // 2))))
    assert h1.error is None and len(h1.ready) == 3
    assert len(_machine._NAMES) <= _machine._NAMES_MAX
    last = h1.ready[-1].headers  # names past the bound are still parsed, just not kept
    assert last[f"x-made-up-2-{_machine._NAMES_MAX // 2 - 1}"] == "v"

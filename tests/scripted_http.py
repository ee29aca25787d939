"""A scripted HTTP/1.1 server for client tests: real sockets on loopback, in the test's own trio
run, answering whatever bytes the test's handler writes (any framing, any misbehaviour)."""

from __future__ import annotations

import contextlib
import functools
import ssl
from typing import AsyncIterator, Awaitable, Callable

import trio

Handler = Callable[[trio.abc.Stream, "Seen"], Awaitable[None]]


class Seen:
    """What the scripted server saw: connections accepted and requests read."""

    def __init__(self) -> None:
        self.connections = 0
        self.open_now = 0
        self.most_open = 0
        self.requests: list[tuple[str, dict[str, str], bytes]] = []


async def read_request(stream: trio.abc.Stream, buf: bytearray, seen: Seen) -> tuple[str, dict[str, str], bytes] | None:
    """One request from ``stream`` (``buf`` keeps what was read past it); None at EOF."""
    while b"\r\n\r\n" not in buf:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buf += data
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    line, *fields = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
    size = int(headers.get("content-length", "0"))
    while len(rest) < size:
        data = await stream.receive_some(65536)
        if not data:
            return None
        rest += data
    buf[:] = rest[size:]
    request = (line, headers, rest[:size])
    seen.requests.append(request)
    return request


def answer(body: bytes | str, status: str = "200 OK", ctype: str = "application/json", extra: str = "") -> bytes:
    data = body.encode() if isinstance(body, str) else body
    return f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(data)}\r\n{extra}\r\n".encode() + data


@contextlib.asynccontextmanager
async def scripted(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[tuple[str, Seen]]:
    seen = Seen()

    async def serve(stream: trio.abc.Stream) -> None:
        seen.connections += 1
        seen.open_now += 1
        seen.most_open = max(seen.most_open, seen.open_now)
        try:
            await handler(stream, seen)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            seen.open_now -= 1
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.aclose()

    async with trio.open_nursery() as nursery:
        if tls is None:
            listeners = await nursery.start(functools.partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
        else:
            listeners = await nursery.start(functools.partial(trio.serve_ssl_over_tcp, serve, 0, tls, host="127.0.0.1"))
        listener = listeners[0] if tls is None else listeners[0].transport_listener
        port = listener.socket.getsockname()[1]
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}", seen
        nursery.cancel_scope.cancel()

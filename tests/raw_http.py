"""Raw HTTP/1.1 byte streams to a real server, answers read back with h11 (a parser nobody
here wrote), for the HTTP/1.1 hygiene and differential tests."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import h11

STATELESS_BODY = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "tools/call",
    "params": {"name": "greet", "arguments": {"name": "raw"}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}},
}).encode()
STATELESS_HEADERS = (b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                     b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: greet\r\n")


def post_mcp(body: bytes = STATELESS_BODY, extra: bytes = b"", version: bytes = b"HTTP/1.1") -> bytes:
    return (b"POST /mcp " + version + b"\r\nHost: 127.0.0.1\r\n" + STATELESS_HEADERS + extra
            + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def get(path: bytes = b"/healthz", extra: bytes = b"", version: bytes = b"HTTP/1.1") -> bytes:
    return b"GET " + path + b" " + version + b"\r\nHost: 127.0.0.1\r\n" + extra + b"\r\n"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    header_list: list[tuple[str, str]] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Exchange:
    answers: list[Answer]
    closed: bool  # the server closed the connection
    raw: bytes


def talk(port: int, *parts: bytes, pause: float = 0.0, timeout: float = 5.0, expect: int | None = None,
         shut: bool = False) -> Exchange:
    """Send ``parts`` (with ``pause`` between them), then read answers until the server closes
    the connection, ``expect`` answers have come, or ``timeout``."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        for i, part in enumerate(parts):
            if i and pause:
                time.sleep(pause)
            sock.sendall(part)
        if shut:
            sock.shutdown(socket.SHUT_WR)
        return read_answers(sock, timeout, expect)
    finally:
        sock.close()


def read_answers(sock: socket.socket, timeout: float = 5.0, expect: int | None = None) -> Exchange:
    """Parse what the server sends. h11 reads responses only to requests it sent, so it is told
    of a stand-in request before each answer."""
    conn = h11.Connection(h11.CLIENT)
    answers: list[Answer] = []
    raw = b""
    closed = False
    current: Answer | None = None
    deadline = time.monotonic() + timeout

    def stand_in() -> None:
        conn.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
        conn.send(h11.EndOfMessage())

    stand_in()
    while expect is None or len(answers) < expect:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError:  # the server closed where h11 awaited an answer
            closed = True
            break
        if event is h11.NEED_DATA:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = sock.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                data = b""
            raw += data
            closed = closed or not data
            conn.receive_data(data)
            continue
        if isinstance(event, h11.InformationalResponse):
            answers.append(Answer(event.status_code, _headers(event), b"", _header_list(event)))
        elif isinstance(event, h11.Response):
            current = Answer(event.status_code, _headers(event), b"", _header_list(event))
        elif isinstance(event, h11.Data):
            assert current is not None
            current.body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert current is not None
            answers.append(current)
            current = None
            if conn.their_state is h11.MUST_CLOSE or conn.our_state is h11.MUST_CLOSE:
                closed = closed or _wait_closed(sock, deadline)
                break
            conn.start_next_cycle()
            stand_in()
        elif isinstance(event, h11.ConnectionClosed):
            closed = True
            break
    return Exchange(answers, closed, raw)


def _wait_closed(sock: socket.socket, deadline: float) -> bool:
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if not sock.recv(65536):
                return True
        except socket.timeout:
            return False
        except OSError:
            return True
    return False


def _headers(event: Any) -> dict[str, str]:
    return {k.decode().lower(): v.decode("latin-1") for k, v in event.headers}


def _header_list(event: Any) -> list[tuple[str, str]]:
    return [(k.decode().lower(), v.decode("latin-1")) for k, v in event.headers]

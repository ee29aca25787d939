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


# -- item 11: slow bodies ------------------------------------------------------------------------

def test_a_body_that_trickles_is_ended_by_its_overall_deadline() -> None:
    """One byte every 0.3 s never trips the 2 s gap deadline; the whole body is due within
    2 s plus 1 s per 1,000 bytes, so the connection gets 408 after ~2 s."""
    env = {"MCPKIT_HTTP_SERVER": "mcpkit", "MCPKIT_BODY_TIMEOUT_S": "2", "MCPKIT_MIN_BODY_BYTES_PER_S": "1000"}
    with HttpServer("--plugin", "hello", env=env) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
            sock.sendall(_slow_body_head())
            started = time.monotonic()
            answer = b""
            while time.monotonic() - started < 8 and not answer:
                try:
                    sock.sendall(b"x")
                except OSError:
                    break
                readable, _, _ = select.select([sock], [], [], 0.3)
                if readable:
                    answer = sock.recv(4096)
            took = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
        assert took < 5, took


class _Tricklers:
    """Slowloris on bodies: up to ``target`` connections, each with a complete POST head
    announcing a large body, then one byte a second; closed ones are replaced (at most
    ``per_second`` new a second, ``most`` in all)."""

    def __init__(self, port: int, target: int, per_second: int = 20, most: int = 600) -> None:
        self.port, self.target, self.per_second, self.most = port, target, per_second, most
        self.opened = self.ended = 0
        self.socks: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "_Tricklers":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        for sock in self.socks:
            sock.close()

    def _run(self) -> None:
        head = _slow_body_head()
        last_byte = time.monotonic()
        window: list[float] = []
        while not self._stop.is_set():
            now = time.monotonic()
            window = [t for t in window if now - t < 1]
            while len(self.socks) < self.target and len(window) < self.per_second and self.opened < self.most:
                try:
                    sock = socket.create_connection(("127.0.0.1", self.port), timeout=2)
                    sock.sendall(head)
                except OSError:
                    break
                sock.setblocking(False)
                self.socks.append(sock)
                self.opened += 1
                window.append(now)
            for sock in list(self.socks):  # an answer (408, 503) or a close ends a trickler
                try:
                    if sock.recv(4096, socket.MSG_PEEK) is not None:
                        self.socks.remove(sock)
                        sock.close()
                        self.ended += 1
                except BlockingIOError:
                    pass
                except OSError:
                    self.socks.remove(sock)
                    sock.close()
                    self.ended += 1
            if now - last_byte >= 1:
                last_byte = now
                for sock in self.socks:
                    try:
                        sock.send(b"x")
                    except OSError:
                        pass
            self._stop.wait(0.05)


def test_slow_bodies_do_not_lock_out_other_clients() -> None:
    """More tricklers than max_connections, their gaps well inside body_timeout_s: a normal
    client is served every time while they keep coming (the laggiest makes room)."""
    cap = 30
    env = {"MCPKIT_HTTP_SERVER": "mcpkit", "MCPKIT_MAX_CONNECTIONS": str(cap), "MCPKIT_ACCESS_LOG": "false"}
    with HttpServer("--plugin", "hello", env=env) as srv:
        base = _fds(srv.proc.pid)
        with _Tricklers(srv.port, target=2 * cap) as tricklers:
            assert wait_until(lambda: tricklers.opened >= cap, timeout=5)
            time.sleep(1.5)  # the first ones have lagged long enough to be shed
            statuses, most_fds = [], 0
            for _ in range(30):
                ex = talk(srv.port, post_mcp(), expect=1, timeout=5)
                statuses.append(ex.answers[0].status if ex.answers else None)
                most_fds = max(most_fds, _fds(srv.proc.pid))
                time.sleep(0.2)
            shed = tricklers.ended
        assert statuses == [200] * 30, statuses
        assert shed > 0  # tricklers made room, and the server never held much more than its cap
        assert most_fds <= base + cap + 10, (base, most_fds)


# -- item 12: heartbeats from the start; vanished clients ------------------------------------------

def _open_get_stream(port: int, sid: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: {sid}\r\n"
                 "MCP-Protocol-Version: 2025-11-25\r\n\r\n".encode())
    assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    return sock


def _vanish(sock: socket.socket) -> None:
    """Close without a FIN or a reset, as a host that lost power or its network does (TCP
    repair mode; needs CAP_NET_ADMIN). The server hears nothing until it writes."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
    except PermissionError:
        pytest.skip("TCP_REPAIR needs CAP_NET_ADMIN")
    sock.close()


@pytest.mark.parametrize("kind", ["mcpkit", "hypercorn"])
def test_an_idle_get_stream_gets_keep_alives_from_the_start(kind: str) -> None:
    env = {"MCPKIT_HTTP_SERVER": kind, "MCPKIT_SSE_HEARTBEAT_S": "0.4"}
    with HttpServer("--plugin", "hello", env=env) as srv:
        sid = srv.initialize()
        with _open_get_stream(srv.port, sid) as sock:
            got, end = b"", time.monotonic() + 2
            while time.monotonic() < end and got.count(b": keep-alive") < 2:
                sock.settimeout(max(0.05, end - time.monotonic()))
                try:
                    got += sock.recv(4096)
                except socket.timeout:
                    break
        assert got.count(b": keep-alive") >= 2, got  # no event was ever sent on this stream


def test_a_get_stream_whose_client_vanished_frees_its_session() -> None:
    """Both sessions hold a GET stream whose client vanished without a FIN: the heartbeat
    finds out (the peer's host answers it with a reset), the streams end, and a new client
    gets a session in place of an idle one instead of 503 for ever."""
    env = {"MCPKIT_HTTP_SERVER": "mcpkit", "MCPKIT_MAX_SESSIONS": "2", "MCPKIT_SSE_HEARTBEAT_S": "0.5"}
    with HttpServer("--plugin", "hello", env=env) as srv:
        socks = [_open_get_stream(srv.port, srv.initialize()) for _ in range(2)]
        status, _, reply = srv.rpc("initialize", INIT)
        assert status == 503  # both sessions are busy with their streams
        for sock in socks:
            _vanish(sock)
        assert wait_until(lambda: srv.rpc("initialize", INIT)[0] == 200, timeout=5)


# -- item 13: the refusal when sessions run out, and defaults ------------------------------------

def test_too_many_sessions_has_its_own_code_and_retry_after() -> None:
    env = {"MCPKIT_HTTP_SERVER": "mcpkit", "MCPKIT_MAX_SESSIONS": "1"}
    with HttpServer("--plugin", "hello", env=env) as srv:
        with _open_get_stream(srv.port, srv.initialize()):
            status, headers, reply = srv.rpc("initialize", INIT, rid=7)
        assert status == 503 and int(headers["retry-after"]) > 0
        assert reply["id"] == 7 and reply["error"]["code"] == -32010, reply
        assert reply["error"]["data"] == {"max_sessions": 1} and "max_sessions" in reply["error"]["message"]


def test_streams_alone_cannot_take_every_session_by_default() -> None:
    """Each GET stream holds a connection and a session: with more sessions than connections
    by default, open streams leave sessions for new clients."""
    settings = Settings()
    assert settings.max_sessions > settings.max_connections


# -- item 16: stderr nobody reads --------------------------------------------------------------------

def test_a_full_stderr_pipe_never_stalls_the_server() -> None:
    """stderr is a pipe nobody reads (after the start-up line): 2,500 requests, each with an
    access-log line, are all answered; once the pipe is read again, a line says how many log
    lines were dropped."""
    proc = subprocess.Popen([MCPKIT, "serve", "--transport", "http", "--port", "0", "--plugin", "hello"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "MCPKIT_HTTP_SERVER": "mcpkit"})
    try:
        assert proc.stderr is not None
        fd, seen = proc.stderr.fileno(), b""
        deadline = time.monotonic() + 30
        while b"serving MCP on" not in seen and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.5)[0]:
                seen += os.read(fd, 65536)
        port = int(re.search(rb"127\.0\.0\.1:(\d+)/mcp", seen).group(1))  # type: ignore[union-attr]
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        answered = 0
        for i in range(2500):  # ~110 bytes of access log each: far more than a 64 KiB pipe holds
            c.request("GET", "/healthz")
            resp = c.getresponse()
            resp.read()
            answered += resp.status == 200
        assert answered == 2500
        drained = bytearray()

        def read_on() -> None:  # someone reads stderr again
            while chunk := os.read(fd, 1 << 20):
                drained.extend(chunk)

        threading.Thread(target=read_on, daemon=True).start()
        note = rb"mcpkit: (\d+) log lines were dropped: stderr was not being read"
        assert wait_until(lambda: re.search(note, bytes(drained)), timeout=5), bytes(drained[-500:])  # said once it drains
        assert int(re.search(note, bytes(drained)).group(1)) > 1000  # type: ignore[union-attr]
        c.request("GET", "/healthz/after")
        c.getresponse().read()
        assert wait_until(lambda: b'"GET /healthz/after" 404' in drained, timeout=5)  # and logging goes on
    finally:
        proc.kill()
        proc.wait()


# -- item 17: smaller HTTP/1.1 points --------------------------------------------------------------

@pytest.fixture(scope="module")
def srv():
    with HttpServer("--plugin", "hello", env={"MCPKIT_HTTP_SERVER": "mcpkit"}) as server:
        yield server


def test_http10_without_host_is_still_served(srv: HttpServer) -> None:
    ex = talk(srv.port, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert [a.status for a in ex.answers] == [200]


def test_a_request_in_absolute_form_is_served_by_its_target(srv: HttpServer) -> None:
    body = STATELESS_BODY
    raw = (b"POST http://127.0.0.1:%d/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" % srv.port + STATELESS_HEADERS
           + b"Content-Length: %d\r\n\r\n" % len(body) + body)
    ex = talk(srv.port, raw, expect=1)
    assert ex.answers[0].status == 200 and ex.answers[0].json()["result"]["content"][0]["text"] == "Hello, raw."
    ex = talk(srv.port, get(b"HTTP://localhost/healthz?x=1"), expect=1)
    assert ex.answers[0].status == 200 and ex.answers[0].json()["status"] == "ok"
    ex = talk(srv.port, b"GET http://evil.example/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", expect=1)
    assert ex.answers[0].status == 421  # the target's host is the one checked (it was the Host field's)


def test_absolute_form_names_the_host_on_hypercorn_too() -> None:
    with HttpServer("--plugin", "hello", env={"MCPKIT_HTTP_SERVER": "hypercorn"}) as server:
        ex = talk(server.port, b"GET http://evil.example/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert [a.status for a in ex.answers] == [421]
        body = STATELESS_BODY
        raw = (b"POST http://127.0.0.1:%d/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" % server.port + STATELESS_HEADERS
               + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        ex = talk(server.port, raw, expect=1)
        assert ex.answers[0].status == 200 and ex.answers[0].json()["result"]["content"][0]["text"] == "Hello, raw."


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

"""HTTP/1.1 correctness and hygiene of mcpkit's own server, against a real listening server:
framing, limits, pipelining, 100-continue, deadlines (slowloris), the connection cap, prompt
close, cancellation on disconnect, the drain, TLS and workers."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from .hostile_plugin import plugin_env
from .http_helpers import HttpServer, wait_until
from .raw_http import STATELESS_BODY, get, post_mcp, talk

FAST = {"MCPKIT_HEADER_TIMEOUT_S": "1", "MCPKIT_BODY_TIMEOUT_S": "1", "MCPKIT_KEEPALIVE_TIMEOUT_S": "1.5"}


@pytest.fixture(scope="module")
def srv():
    with HttpServer("--plugin", "hello", env={"MCPKIT_HTTP_SERVER": "mcpkit", **FAST}) as server:
        yield server


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_date_server_and_framing(srv: HttpServer) -> None:
    ex = talk(srv.port, post_mcp(), expect=1)
    answer = ex.answers[0]
    assert answer.status == 200 and answer.headers["server"] == "mcpkit"
    assert answer.headers["date"].endswith(" GMT") and int(answer.headers["content-length"]) == len(answer.body)
    assert answer.json()["result"]["content"][0]["text"] == "Hello, raw."


def test_pipelined_requests_are_answered_in_order(srv: HttpServer) -> None:
    bodies = [STATELESS_BODY.replace(b'"id": 1', b'"id": %d' % i) for i in range(2, 6)]
    stream = get() + b"".join(post_mcp(body) for body in bodies) + get(b"/no-such")
    ex = talk(srv.port, stream, expect=6)
    assert [a.status for a in ex.answers] == [200, 200, 200, 200, 200, 404]
    assert [a.json()["id"] for a in ex.answers[1:5]] == [2, 3, 4, 5]


def test_expect_100_continue(srv: HttpServer) -> None:
    head = post_mcp().split(b"\r\n\r\n")[0] + b"\r\nExpect: 100-continue\r\n\r\n"
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
        sock.sendall(head)
        assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(STATELESS_BODY)
        reply = sock.recv(65536)
    assert reply.startswith(b"HTTP/1.1 200 OK") and b"Hello, raw." in reply


def test_chunked_request_body(srv: HttpServer) -> None:
    head = post_mcp().split(b"Content-Length")[0] + b"Transfer-Encoding: chunked\r\n\r\n"
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(STATELESS_BODY[i:i + 50]), STATELESS_BODY[i:i + 50])
                      for i in range(0, len(STATELESS_BODY), 50)) + b"0\r\n\r\n"
    ex = talk(srv.port, head, chunks[:30], chunks[30:], pause=0.05, expect=1)
    assert ex.answers[0].status == 200 and ex.answers[0].json()["id"] == 1


def test_http10_and_connection_close_end_the_connection(srv: HttpServer) -> None:
    ex = talk(srv.port, get(version=b"HTTP/1.0"))
    assert ex.answers[0].status == 200 and ex.closed and ex.answers[0].headers["connection"] == "close"
    ex = talk(srv.port, get(extra=b"Connection: close\r\n") + get())
    assert len(ex.answers) == 1 and ex.closed
    ex = talk(srv.port, get(version=b"HTTP/1.0", extra=b"Connection: keep-alive\r\n") + get(), expect=2)
    assert [a.status for a in ex.answers] == [200, 200]  # HTTP/1.0 keep-alive is honoured


@pytest.mark.parametrize("raw, status", [
    (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    (get(extra=b"X-Big: " + b"b" * 40000 + b"\r\n"), 431),
    (get(extra=b"".join(b"X-%d: y\r\n" % i for i in range(101))), 431),
    (b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    (b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Fold: a\r\n  b\r\n\r\n", 400),
    (b"GET /healthz HTTP/1.1\nHost: x\n\n", 400),
    (b"POST /mcp HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
    # issue 22: Host rules (RFC 9112 §3.2) and transfer codings other than chunked alone
    (b"GET /healthz HTTP/1.1\r\n\r\n", 400),
    (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n\r\n", 400),
    (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1 evil\r\n\r\n", 400),
    (b"GET http://user@127.0.0.1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400),
    (b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n", 400),
    (b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 400),
    (b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400),
])
def test_malformed_and_oversized_requests_are_refused_and_closed(srv: HttpServer, raw: bytes, status: int) -> None:
    ex = talk(srv.port, raw)
    assert [a.status for a in ex.answers] == [status] and ex.closed
    assert ex.answers[0].json()["error"]  # a JSON body, in the route's shape


def test_a_413_is_read_by_a_client_that_sends_its_whole_body(srv: HttpServer) -> None:
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    c.request("POST", "/mcp", body=b"x" * (5 * 1024 * 1024), headers={"Content-Type": "application/json"})
    resp = c.getresponse()
    assert resp.status == 413 and "max_message_bytes" in json.loads(resp.read())["error"]["message"]
    head = (b"POST /mcp/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    ex = talk(srv.port, head, b"%x\r\n%s\r\n" % (4 * 1024 * 1024 + 1, b"y" * (4 * 1024 * 1024 + 1)))
    assert ex.answers[0].status == 413 and ex.answers[0].json()["error"]["code"] == "PAYLOAD_TOO_LARGE"


def test_upgrade_is_answered_as_http11_then_closed(srv: HttpServer) -> None:
    ex = talk(srv.port, get(extra=b"Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n") + get())
    assert [a.status for a in ex.answers] == [200] and ex.closed


def test_slowloris_connections_are_dropped_at_the_head_deadline(srv: HttpServer) -> None:
    socks = []
    for _ in range(50):
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        socks.append(sock)
    started = time.monotonic()
    for _ in range(4):  # trickle: a header byte now and then, never the end of the head
        time.sleep(0.3)
        for sock in socks:
            try:
                sock.sendall(b"X")
            except OSError:
                pass
    answers = []
    for sock in socks:
        sock.settimeout(3)
        answers.append(sock.recv(4096)[:12])
        sock.close()
    assert answers == [b"HTTP/1.1 408"] * len(socks)  # each is told why, none is just dropped
    assert time.monotonic() - started < 4
    assert srv.call("GET", "/healthz")[0] == 200


def test_idle_keep_alive_and_body_gaps_end_at_their_deadlines(srv: HttpServer) -> None:
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
        sock.sendall(get())
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        t0 = time.monotonic()
        assert sock.recv(4096) == b""  # closed while idle
        assert 1.0 <= time.monotonic() - t0 < 3.5
    head = post_mcp().split(b"\r\n\r\n")[0] + b"\r\n\r\n"
    ex = talk(srv.port, head + STATELESS_BODY[:10])
    assert [a.status for a in ex.answers] == [408] and ex.closed


def test_connect_close_churn_leaves_no_sockets_behind(srv: HttpServer) -> None:
    base = _fds(srv.proc.pid)
    for i in range(3000):
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        if i % 3 == 1:
            sock.sendall(get())  # a request whose answer nobody reads
        sock.close()
    assert wait_until(lambda: _fds(srv.proc.pid) <= base + 2, timeout=2.5), (base, _fds(srv.proc.pid))
    assert srv.call("GET", "/healthz")[0] == 200


def test_connection_cap() -> None:
    with HttpServer("--plugin", "hello", env={"MCPKIT_HTTP_SERVER": "mcpkit", "MCPKIT_MAX_CONNECTIONS": "4"}) as server:
        held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(4)]
        time.sleep(0.2)
        ex = talk(server.port, get())
        assert ex.answers[0].status == 503 and ex.answers[0].headers["retry-after"] == "1"
        for sock in held:
            sock.close()
        assert wait_until(lambda: talk(server.port, get()).answers[0].status == 200)


def test_a_client_that_hangs_up_cancels_its_long_tool_call(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    env = {**plugin_env(tmp_path / "site"), "MCPKIT_HTTP_SERVER": "mcpkit", "MCPKIT_TEST_MARKERS": str(tmp_path)}
    with HttpServer("--plugin", "hostile", env=env) as server:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "watched", "arguments": {"marker": "marker"}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}).encode()
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(post_mcp(body).replace(b"Mcp-Name: greet", b"Mcp-Name: watched"))
            time.sleep(0.3)
        assert wait_until(lambda: marker.exists(), timeout=3)
        assert marker.read_text() == "cancelled"


def test_sigterm_drains(tmp_path: Path) -> None:
    env = {**plugin_env(tmp_path / "site"), "MCPKIT_HTTP_SERVER": "mcpkit"}
    with HttpServer("--plugin", "hostile", env=env) as server:
        idle = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        idle.sendall(get())
        idle.recv(4096)
        busy = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "slow", "arguments": {"seconds": 1}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}})
        busy.request("POST", "/mcp", body, {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                                            "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "slow"})
        time.sleep(0.2)
        server.proc.send_signal(signal.SIGTERM)
        assert idle.recv(4096) == b""  # the idle keep-alive connection is closed at once
        resp = busy.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["result"]["content"][0]["text"] == "slept 1.0"
        assert resp.getheader("connection") == "close"
        assert server.proc.wait(10) == 0
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", server.port), timeout=1)


def test_access_log_can_be_turned_off() -> None:
    with HttpServer("--plugin", "hello", env={"MCPKIT_HTTP_SERVER": "mcpkit", "MCPKIT_ACCESS_LOG": "false"}) as server:
        server.call("GET", "/healthz")
        time.sleep(0.2)
        assert b"mcpkit.http.access" not in server.stderr
    with HttpServer("--plugin", "hello", env={"MCPKIT_HTTP_SERVER": "mcpkit"}) as server:
        server.call("GET", "/healthz", headers={"X-Request-ID": "trace-me"})
        assert wait_until(lambda: b'"GET /healthz" 200' in server.stderr and b"request_id=trace-me" in server.stderr)


@pytest.mark.parametrize("kind", ["mcpkit", "hypercorn"])
def test_tls(tmp_path: Path, kind: str) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    with HttpServer("--plugin", "hello", "--server", kind, "--certfile", str(cert), "--keyfile", str(key)) as server:
        ctx = ssl.create_default_context(cafile=str(cert))
        c = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
        c.request("POST", "/mcp", STATELESS_BODY, {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                                                   "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "greet"})
        resp = c.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["result"]["content"][0]["text"] == "Hello, raw."
        c.request("GET", "/healthz")
        assert c.getresponse().status == 200  # kept alive over TLS


def test_workers_share_one_port() -> None:
    with HttpServer("--plugin", "hello", "--workers", "2", env={"MCPKIT_HTTP_SERVER": "mcpkit"}) as server:
        pids = set()
        deadline = time.monotonic() + 10
        while len(pids) < 2 and time.monotonic() < deadline:
            pids.add(json.loads(server.call("GET", "/healthz")[2])["pid"])
        assert len(pids) == 2 and server.proc.pid not in pids
        os.kill(next(iter(pids)), signal.SIGKILL)  # a worker dies: another takes its place
        assert wait_until(lambda: len({json.loads(server.call("GET", "/healthz")[2])["pid"] for _ in range(20)} - pids) >= 1, timeout=10)
        assert server.stop() == 0


def test_pipelining_is_capped(srv: HttpServer) -> None:
    ex = talk(srv.port, get() * 150, timeout=10)
    assert [a.status for a in ex.answers] == [200] * 100 and ex.closed

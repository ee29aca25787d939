"""Hostile and careless input over HTTP: 4xx for the client's faults, never a 500 or a crash.

Each test reproduces a defect the fuzz campaign found (issue 11) against a real server.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .hostile_plugin import plugin_env
from .http_helpers import ACCEPT, INIT, HttpServer, modern_headers


pytestmark = pytest.mark.usefixtures("http_server_kind")


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, str]:
    return plugin_env(tmp_path / "site")


def _stateless(srv: HttpServer, raw: bytes) -> tuple[int, Any]:
    status, _, body = srv.call("POST", "/mcp", raw=raw, headers=modern_headers("tools/call", "greet"))
    return status, json.loads(body)


@pytest.mark.parametrize("raw", [
    b'{"jsonrpc":"2.0","id":1,"method":"\xff"}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"\xc3\x28"},"_meta":{}}}',
    b"[" * 1500,
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","_meta":{},"arguments":' + b'{"a":' * 900 + b"1" + b"}" * 900 + b"}}",
])
def test_bad_bytes_are_400_parse_errors(raw: bytes) -> None:
    with HttpServer("--plugin", "hello") as srv:
        status, reply = _stateless(srv, raw)
        assert status == 400 and reply["error"]["code"] == -32700
        sid = srv.initialize()
        status, _, body = srv.call("POST", "/mcp", raw=raw, headers={"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
        assert status == 400 and json.loads(body)["error"]["code"] == -32700
        assert b"Traceback" not in srv.stderr


def test_cors_headers_are_single_valued() -> None:
    with HttpServer("--plugin", "hello") as srv:
        for method, headers in (("OPTIONS", {"Access-Control-Request-Method": "POST"}), ("POST", {})):
            c = srv.conn()
            c.request(method, "/mcp", body=b"{}" if method == "POST" else None,
                      headers={"Origin": "http://localhost:3000", "Content-Type": "application/json", "Accept": ACCEPT, **headers})
            resp = c.getresponse()
            resp.read()
            names = [k.lower() for k, _ in resp.getheaders()]
            for name in ("access-control-allow-origin", "access-control-expose-headers", "vary"):
                assert names.count(name) == 1, (method, name, resp.getheaders())
            c.close()


def test_legacy_sse_client_that_never_reads_loses_its_stream(hostile: dict[str, str]) -> None:
    env = {**hostile, "MCPKIT_SSE_BACKLOG_BYTES": "262144"}
    with HttpServer("--plugin", "hostile", env=env) as srv:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", srv.port))
        sock.sendall(b"GET /sse HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
        head = b""
        while b"session_id=" not in head or b"\n\n" not in head.split(b"session_id=")[1]:
            head += sock.recv(4096)
        sid = head.split(b"session_id=")[1].split()[0].decode()
        rss_before = _rss_kib(srv.proc.pid)
        path = f"/messages?session_id={sid}"

        def post(msg: dict[str, Any]) -> int:
            return srv.call("POST", path, msg)[0]

        assert post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}) == 202
        post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        statuses = []
        for i in range(150):  # 150 answers of 1 MB each, never read
            statuses.append(post({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": "big", "arguments": {"size": 1_000_000}}}))
            if statuses[-1] == 404:
                break
        assert statuses[-1] == 404, "the server kept queueing for a client that does not read"
        assert _rss_kib(srv.proc.pid) - rss_before < 64 * 1024
        sock.close()
        assert srv.call("GET", "/healthz")[0] == 200


def test_sigterm_lets_session_requests_finish_and_ends_streams_cleanly(hostile: dict[str, str]) -> None:
    with HttpServer("--plugin", "hostile", env=hostile) as srv:
        sid = srv.initialize()
        stream = srv.conn(timeout=15)
        stream.request("GET", "/mcp", headers={"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25", "Accept": "text/event-stream"})
        get_resp = stream.getresponse()
        assert get_resp.status == 200
        answers: list[Any] = []

        def call() -> None:
            answers.append(srv.rpc("tools/call", {"name": "slow", "arguments": {"seconds": 1.0}}, session=sid))

        worker = threading.Thread(target=call)
        worker.start()
        time.sleep(0.3)
        srv.proc.send_signal(15)
        worker.join(15)
        status, _, reply = answers[0]
        assert status == 200 and reply["result"]["content"][0]["text"] == "slept 1.0", answers
        assert get_resp.read() is not None  # the chunked body ends properly: no IncompleteRead
        assert srv.proc.wait(15) == 0
        assert b"Traceback" not in srv.stderr and b"EndOfChannel" not in srv.stderr


def test_session_requests_in_flight_are_capped(hostile: dict[str, str]) -> None:
    with HttpServer("--plugin", "hostile", env={**hostile, "MCPKIT_MAX_CONCURRENT_REQUESTS": "2"}) as srv:
        sid = srv.initialize()
        results: list[Any] = []
        workers = [threading.Thread(target=lambda rid=rid: results.append(srv.rpc("tools/call", {"name": "slow", "arguments": {"seconds": 0.5}}, session=sid, rid=rid)))
                   for rid in range(3)]
        for w in workers:
            w.start()
            time.sleep(0.05)
        for w in workers:
            w.join(10)
        statuses = sorted(r[0] for r in results)
        assert statuses == [200, 200, 503]
        busy = next(r for r in results if r[0] == 503)
        assert busy[2]["error"]["code"] == -32000 and "max_concurrent_requests" in busy[2]["error"]["message"]


def test_stateless_request_with_bad_meta_types_is_400() -> None:
    with HttpServer("--plugin", "hello") as srv:
        for meta in ({"io.modelcontextprotocol/protocolVersion": 5}, [], "x"):
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greet", "arguments": {"name": "a"}, "_meta": meta}}
            status, _, out = srv.call("POST", "/mcp", body, modern_headers("tools/call", "greet"))
            assert status == 400 and json.loads(out)["error"]["code"] in (-32602, -32600, -32020)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_search_api_is_not_found_when_unused_and_messages_unknown_session() -> None:
    with HttpServer("--plugin", "hello") as srv:
        assert srv.call("POST", "/messages?session_id=nope", {"jsonrpc": "2.0", "method": "x"})[0] == 404
        status, h, body = srv.call("GET", "/no/such/path")
        assert status == 404 and json.loads(body)["error"]["code"] == "NOT_FOUND"
        status, _, body = srv.call("POST", "/healthz", {})
        assert status == 405 and json.loads(body)["error"]["code"] == "METHOD_NOT_ALLOWED"


def test_dropping_a_get_stream_before_its_first_event_logs_nothing_alarming() -> None:
    with HttpServer("--plugin", "hello") as srv:
        sid = srv.initialize()
        for _ in range(5):
            with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
                sock.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: {sid}\r\n"
                             "MCP-Protocol-Version: 2025-11-25\r\n\r\n".encode())
                assert sock.recv(64).startswith(b"HTTP/1.1 200")
        time.sleep(0.3)
        assert srv.call("GET", "/healthz")[0] == 200
        assert b"Traceback" not in srv.stderr and b"ERROR" not in srv.stderr


def test_a_session_replay_store_is_bounded_in_bytes(hostile: dict[str, str]) -> None:
    with HttpServer("--plugin", "hostile", env=hostile) as srv:
        sid = srv.initialize()
        before = _rss_kib(srv.proc.pid)
        for i in range(60):  # 60 answers of 1 MB each, all kept for replay before
            status, _, reply = srv.rpc("tools/call", {"name": "big", "arguments": {"size": 1_000_000}}, session=sid, rid=i)
            assert status == 200
        assert _rss_kib(srv.proc.pid) - before < 24 * 1024


def test_replay_store_keeps_the_newest_within_count_and_bytes() -> None:
    from mcpkit.transports.http.session_state import ReplayStore

    store = ReplayStore(max_events=3, max_bytes=10)
    for seq, data in enumerate([b"aaaa", b"bbbb", b"cc", b"d"], 1):
        store.append("1", seq, data)
    assert [d for _, _, d, _ in store] == [b"bbbb", b"cc", b"d"]  # 4+4+2+1 > 10: the oldest went
    store.append("1", 5, b"x" * 50)  # bigger than the bound alone: not kept (issue 22), the rest stays
    assert [d for _, _, d, _ in store] == [b"bbbb", b"cc", b"d"]
    store.append("1", 6, b"y" * 10)  # exactly the bound: kept, alone
    assert [d for _, _, d, _ in store] == [b"y" * 10]

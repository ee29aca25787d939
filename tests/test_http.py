"""Streamable HTTP, legacy SSE and HTTP hygiene against a real hypercorn server on loopback."""

from __future__ import annotations

import json
import re
import signal
import socket
import time

import pytest

from .helpers import modern_meta
from .http_helpers import ACCEPT, INIT, HttpServer, modern_headers, sse_events


pytestmark = pytest.mark.usefixtures("http_server_kind")


@pytest.fixture(scope="module")
def srv(http_server_kind):
    with HttpServer("--plugin", "hello") as server:
        yield server


def test_healthz_and_request_ids(srv: HttpServer) -> None:
    status, h, body = srv.call("GET", "/healthz", headers={"X-Request-ID": "abc-123"})
    assert status == 200 and h["x-request-id"] == "abc-123"
    info = json.loads(body)
    assert info["status"] == "ok" and info["plugins"] == ["hello"]
    assert re.fullmatch(r"[0-9a-f-]{36}", srv.call("GET", "/healthz")[1]["x-request-id"])


def test_session_lifecycle(srv: HttpServer) -> None:
    sid = srv.initialize()
    assert re.fullmatch(r"[\x21-\x7e]+", sid) and len(sid) >= 20
    status, h, reply = srv.rpc("tools/call", {"name": "greet", "arguments": {"name": "Web"}}, session=sid)
    assert status == 200 and h["content-type"] == "application/json"
    assert reply["result"]["content"][0]["text"] == "Hello, Web."
    assert srv.rpc("tools/list")[0] == 400  # no session id
    assert srv.rpc("tools/list", session="nope")[0] == 404
    assert srv.rpc("tools/list", session=sid, headers={"MCP-Protocol-Version": "1999-01-01"})[0] == 400
    assert srv.call("DELETE", "/mcp", headers={"Mcp-Session-Id": sid})[0] == 200
    assert srv.rpc("tools/list", session=sid)[0] == 404
    assert srv.call("DELETE", "/mcp", headers={"Mcp-Session-Id": sid})[0] == 404


def test_missing_protocol_header_means_2025_03_26(srv: HttpServer) -> None:
    sid = srv.initialize()
    status, _, reply = srv.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, {"Mcp-Session-Id": sid})
    assert status == 200 and json.loads(reply)["result"]["tools"]


def test_hygiene_statuses(srv: HttpServer) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}
    assert srv.call("POST", "/mcp", body, {"Accept": "text/html"})[0] == 406
    assert srv.call("POST", "/mcp", body, {"Content-Type": "text/plain"})[0] == 415
    # announced too large: answered before the body is read
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Accept: application/json, text/event-stream\r\nContent-Length: 5000000\r\n\r\n{")
        assert sock.recv(100).startswith(b"HTTP/1.1 413")
    # streamed without a length: cut off once it passes the limit
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 65536
        try:
            for _ in range(80):
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:
            pass
        assert sock.recv(100).startswith(b"HTTP/1.1 413")
    status, h, _ = srv.call("PUT", "/mcp", body)
    assert status == 405 and "POST" in h["allow"]
    assert srv.call("POST", "/sse", body)[0] == 405
    assert srv.call("GET", "/nowhere")[0] == 404
    status, _, parse = srv.call("POST", "/mcp", raw=b"{oops", headers={"MCP-Protocol-Version": "2026-07-28"})
    assert status == 400 and json.loads(parse)["error"]["code"] == -32700


def test_origin_host_and_cors(srv: HttpServer) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}
    status, _, err = srv.call("POST", "/mcp", body, {"Origin": "http://evil.example.com"})
    assert status == 403 and json.loads(err)["error"]["code"] == -32600 and json.loads(err)["id"] is None
    status, h, _ = srv.call("POST", "/mcp", body, {"Origin": "http://localhost:5173"})
    assert status == 200 and h["access-control-allow-origin"] == "http://localhost:5173"
    assert "Mcp-Session-Id" in h["access-control-expose-headers"]
    status, h, _ = srv.call("OPTIONS", "/mcp", headers={"Origin": "http://127.0.0.1:3000", "Access-Control-Request-Method": "POST"})
    assert status == 204
    assert h["access-control-allow-methods"] == "GET, POST, DELETE, OPTIONS"
    for name in ("MCP-Protocol-Version", "Mcp-Session-Id", "Mcp-Method", "Mcp-Name", "Last-Event-ID", "X-Request-ID", "Authorization"):
        assert name in h["access-control-allow-headers"]
    assert srv.call("POST", "/mcp", body, {"Host": "evil.example.com"})[0] == 421


def test_bearer_token() -> None:
    with HttpServer("--plugin", "hello", "--auth-token", "s3cret") as srv:
        status, h, _ = srv.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
        assert status == 401 and h["www-authenticate"].startswith("Bearer")
        assert srv.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, {"Authorization": "Bearer wrong"})[0] == 401
        assert srv.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, {"Authorization": "Bearer s3cret"})[0] == 200
        assert srv.call("GET", "/healthz")[0] == 200


def stateless(srv: HttpServer, method: str, params: dict, name: str | None = None, headers: dict | None = None):
    return srv.rpc(method, {**params, "_meta": params.get("_meta", modern_meta())}, headers={**modern_headers(method, name), **(headers or {})})


def test_stateless_era(srv: HttpServer) -> None:
    status, h, reply = stateless(srv, "tools/call", {"name": "greet", "arguments": {"name": "S"}}, "greet")
    assert status == 200 and "mcp-session-id" not in h
    assert reply["result"]["content"][0]["text"] == "Hello, S." and reply["result"]["resultType"] == "complete"
    disc = stateless(srv, "server/discover", {})[2]["result"]
    assert disc["supportedVersions"] == ["2026-07-28"]
    # header rules
    status, _, err = stateless(srv, "tools/call", {"name": "greet", "arguments": {"name": "S"}}, "other")
    assert status == 400 and err["error"]["code"] == -32020 and err["id"] == 1
    status, _, err = stateless(srv, "tools/call", {"name": "greet", "arguments": {}}, "greet", {"Mcp-Method": "tools/list"})
    assert status == 400 and err["error"]["code"] == -32020
    status, _, err = srv.rpc("tools/list", {"_meta": modern_meta()}, headers={"Mcp-Method": "tools/list"})
    assert status == 400 and err["error"]["code"] == -32020  # no MCP-Protocol-Version
    status, _, err = srv.rpc("tools/list", {"_meta": {}}, headers=modern_headers("tools/list"))
    assert status == 400 and err["error"]["code"] == -32602
    status, _, err = srv.rpc("tools/list", {"_meta": modern_meta("v999")}, headers={**modern_headers("tools/list"), "MCP-Protocol-Version": "v999"})
    assert status == 400 and err["error"]["code"] == -32022 and err["error"]["data"]["requested"] == "v999"
    status, _, err = srv.rpc("tools/list", {"_meta": modern_meta("v999")}, headers=modern_headers("tools/list"))
    assert status == 400 and err["error"]["code"] == -32020
    for method in ("ping", "initialize", "nope/nope"):
        status, _, err = stateless(srv, method, {})
        assert status == 404 and err["error"]["code"] == -32601
    status, _, err = stateless(srv, "resources/read", {"uri": "hello://none"}, "hello://none")
    assert status == 400 and err["error"]["data"] == {"uri": "hello://none"}
    assert srv.call("GET", "/mcp", headers={"MCP-Protocol-Version": "2026-07-28"})[0] == 405
    assert srv.call("DELETE", "/mcp", headers={"MCP-Protocol-Version": "2026-07-28"})[0] == 400


def test_progress_streams_as_sse(srv: HttpServer) -> None:
    meta = modern_meta(progressToken="tok")
    status, h, frames = stateless(srv, "tools/call", {"name": "count", "arguments": {"to": 3, "delay": 0}, "_meta": meta}, "count")
    assert h["content-type"].startswith("text/event-stream")
    assert [f["params"]["progress"] for f in frames[:-1]] == [1, 2, 3]
    assert frames[-1]["result"]["content"][0]["text"] == "Counted to 3."
    sid = srv.initialize()
    status, h, frames = srv.rpc("tools/call", {"name": "count", "arguments": {"to": 2, "delay": 0}, "_meta": {"progressToken": 5}}, session=sid)
    assert h["content-type"].startswith("text/event-stream") and frames[-1]["id"] == 1


def test_resume_after_dropped_stream(srv: HttpServer) -> None:
    sid = srv.initialize()
    c = srv.conn()
    body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "count", "arguments": {"to": 6, "delay": 0.1}, "_meta": {"progressToken": 1}}})
    c.request("POST", "/mcp", body, {"Content-Type": "application/json", "Accept": ACCEPT, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    resp = c.getresponse()
    events = sse_events(resp)
    priming = next(events)
    assert priming.get("data", "") == "" and "retry" in priming and priming["id"]
    first = next(events)
    assert json.loads(first["data"])["params"]["progress"] == 1
    c.sock.shutdown(socket.SHUT_RDWR)  # the client drops the stream mid-call
    c.close()
    time.sleep(0.3)
    g = srv.conn()
    g.request("GET", "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": sid, "Last-Event-ID": first["id"]})
    resumed = g.getresponse()
    assert resumed.status == 200
    got = [json.loads(e["data"]) for e in sse_events(resumed) if e.get("data")]
    assert [m["params"]["progress"] for m in got if m.get("method") == "notifications/progress"] == [2, 3, 4, 5, 6]
    assert got[-1]["id"] == 9 and got[-1]["result"]["content"][0]["text"] == "Counted to 6."


def test_slow_reader_does_not_block_others(srv: HttpServer) -> None:
    sid = srv.initialize()
    lazy = srv.conn()
    lazy.request("GET", "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": sid})
    assert lazy.getresponse().status == 200  # opened, never read
    start = time.monotonic()
    for _ in range(20):
        assert srv.rpc("tools/call", {"name": "greet", "arguments": {"name": "x"}}, session=sid)[0] == 200
    assert time.monotonic() - start < 5
    lazy.close()


def test_legacy_sse(srv: HttpServer) -> None:
    c = srv.conn()
    c.request("GET", "/sse", headers={"Accept": "text/event-stream"})
    resp = c.getresponse()
    events = sse_events(resp)
    endpoint = next(events)
    assert endpoint["event"] == "endpoint" and endpoint["data"].startswith("/messages?session_id=")
    post = lambda msg: srv.call("POST", endpoint["data"], msg)  # noqa: E731
    assert post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": dict(INIT, protocolVersion="2024-11-05")})[0] == 202
    init = json.loads(next(events)["data"])
    assert init["result"]["protocolVersion"] == "2024-11-05"
    post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "greet", "arguments": {"name": "Old"}}})[0] == 202
    reply = json.loads(next(events)["data"])
    assert reply["id"] == 2 and reply["result"]["content"][0]["text"] == "Hello, Old."
    c.close()
    assert srv.call("POST", "/messages?session_id=unknown", {"jsonrpc": "2.0", "id": 1, "method": "ping"})[0] == 404


def test_session_expiry() -> None:
    with HttpServer("--plugin", "hello", env={"MCPKIT_SESSION_TTL_S": "0.3"}) as srv:
        sid = srv.initialize()
        assert srv.rpc("tools/list", session=sid)[0] == 200
        time.sleep(1.0)
        assert srv.rpc("tools/list", session=sid)[0] == 404


def test_session_limit_evicts_the_idlest() -> None:
    with HttpServer("--plugin", "hello", env={"MCPKIT_MAX_SESSIONS": "2"}) as srv:
        first, second = srv.initialize(), srv.initialize()
        srv.rpc("tools/list", session=first)  # second is now the idlest
        srv.initialize()
        assert srv.rpc("tools/list", session=first)[0] == 200
        assert srv.rpc("tools/list", session=second)[0] == 404


def test_graceful_shutdown_with_open_streams() -> None:
    with HttpServer("--plugin", "hello", env={"MCPKIT_SHUTDOWN_GRACE_S": "1"}) as srv:
        sid = srv.initialize()
        get = srv.conn()
        get.request("GET", "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": sid})
        assert get.getresponse().status == 200
        legacy = srv.conn()
        legacy.request("GET", "/sse", headers={"Accept": "text/event-stream"})
        assert legacy.getresponse().status == 200
        start = time.monotonic()
        assert srv.stop(signal.SIGTERM) == 0
        assert time.monotonic() - start < 8
        assert b"Traceback" not in srv.stderr


def test_the_chosen_server_answers(srv: HttpServer, http_server_kind: str) -> None:
    _, h, _ = srv.call("GET", "/healthz")
    assert h["server"] == ("mcpkit" if http_server_kind == "mcpkit" else "hypercorn-h11")

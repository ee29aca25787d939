"""Who gets the console (issue 25), against real `mcpkit serve --transport http --console`
processes: off it is not there; on, a client is judged by its socket's peer address (never the
Host header), outside the trusted addresses it needs the operator token (a bearer header, or the
page's login that sets a cookie), an MCP token is not that token, proxied and cross-origin
requests are refused, and an event-stream viewer that stops reading is dropped.

The server binds 127.0.0.1 only; a client connects from 127.0.0.2 (another loopback address,
so the test never leaves the machine) and the server is told to trust 127.0.0.1 alone
(``MCPKIT_CONSOLE_TRUSTED``): that client stands for any client off the trusted addresses.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
import subprocess
from pathlib import Path
from typing import Any

from .helpers import MCPKIT
from .http_helpers import ACCEPT, HttpServer, modern_headers, wait_until

PLUGIN = str(Path(__file__).parent / "console_plugin.py")
STATELESS_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
ONLY_127_0_0_1 = {"MCPKIT_CONSOLE_TRUSTED": "127.0.0.1/32,::1/128"}
OUTSIDE = "127.0.0.2"


def fetch(srv: HttpServer, path: str, *, source: str = "127.0.0.1", method: str = "GET", body: Any = None,
          headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10, source_address=(source, 0))
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    hdrs = {"Content-Type": "application/json"} if isinstance(body, (dict, list)) else {}
    conn.request(method, path, body=data, headers={**hdrs, **(headers or {})})
    resp = conn.getresponse()
    out = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, out


def served(*args: str, env: dict[str, str] | None = None) -> HttpServer:
    return HttpServer(PLUGIN, "--plugin", "console_plugin", *args, env=env)


CALL = {"tool": "repeat", "arguments": {"word": "x", "times": 2}}


def test_off_there_is_no_console_and_on_loopback_clients_have_it() -> None:
    with served() as srv:
        for path in ("/console", "/console/api/state", "/console/events"):
            assert fetch(srv, path)[0] == 404
    with served("--console") as srv:
        status, headers, body = fetch(srv, "/console")
        assert status == 200 and headers["content-type"].startswith("text/html") and b"console.js" in body
        status, headers, body = fetch(srv, "/console/static/console.js")
        assert status == 200 and headers["content-type"].startswith("text/javascript") and b"EventSource" in body
        # the default trusted addresses are loopback: 127.0.0.2 is one of them
        assert fetch(srv, "/console/api/state", source=OUTSIDE)[0] == 200
        status, _, body = fetch(srv, "/console/api/call", method="POST", body=CALL)
        assert status == 200 and json.loads(body)["result"]["content"][0]["text"] == "x x"


def test_a_client_off_the_trusted_addresses_is_refused_whatever_host_it_names() -> None:
    with served("--console", env=ONLY_127_0_0_1) as srv:
        for host in (None, "127.0.0.1", "localhost"):
            headers = {"Host": f"{host}:{srv.port}"} if host else {}
            for path in ("/console", "/console/api/state", "/console/api/catalog", "/console/events",
                         "/console/static/console.js"):
                status, _, body = fetch(srv, path, source=OUTSIDE, headers=headers)
                assert status == 403, (path, host, status)
            status, _, body = fetch(srv, "/console/api/call", source=OUTSIDE, method="POST", body=CALL, headers=headers)
            assert status == 403 and b"console_trusted" in body
        assert b"tools/call" not in fetch(srv, "/console/api/state")[2]  # the refused call never ran
        assert fetch(srv, "/console/api/state")[0] == 200  # 127.0.0.1 is trusted
        # a plain MCP client from there is served as ever: only the console is closed to it
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
        status, _, _ = fetch(srv, "/mcp", source=OUTSIDE, method="POST", body=body,
                             headers={**modern_headers("tools/list"), "Accept": ACCEPT})
        assert status == 200


def test_the_operator_token_opens_it_and_an_mcp_token_does_not() -> None:
    env = {**ONLY_127_0_0_1, "MCPKIT_CONSOLE_TOKEN": "operator-secret"}
    with served("--console", "--auth-token", "mcp-secret", env=env) as srv:
        status, headers, body = fetch(srv, "/console", source=OUTSIDE)
        assert status == 401 and headers["www-authenticate"].startswith("Bearer") and b'name=token' in body
        assert fetch(srv, "/console/api/state", source=OUTSIDE, headers={"Authorization": "Bearer mcp-secret"})[0] == 401
        assert fetch(srv, "/console/api/state", source=OUTSIDE, headers={"Authorization": "Bearer wrong"})[0] == 401
        bearer = {"Authorization": "Bearer operator-secret"}
        assert fetch(srv, "/console/api/state", source=OUTSIDE, headers=bearer)[0] == 200
        # a try-it call on a server that authorizes /mcp runs as the console's principal
        status, _, body = fetch(srv, "/console/api/call", source=OUTSIDE, method="POST", body=CALL, headers=bearer)
        assert status == 200 and json.loads(body)["result"]["content"][0]["text"] == "x x"
        # the console's token is no MCP token
        status, _, _ = fetch(srv, "/mcp", source=OUTSIDE, method="POST", body={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                             headers={**bearer, "Accept": ACCEPT})
        assert status == 401
        # the page's login: a wrong token is refused, the right one becomes a cookie (not the token)
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        status, _, body = fetch(srv, "/console/login", source=OUTSIDE, method="POST", body=b"token=nope", headers=form)
        assert status == 401 and b"not the console token" in body
        status, headers, _ = fetch(srv, "/console/login", source=OUTSIDE, method="POST", body=b"token=operator-secret",
                                   headers=form)
        assert status == 303 and headers["location"] == "/console"
        cookie = headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "operator-secret" not in cookie
        jar = {"Cookie": cookie.split(";", 1)[0]}
        status, _, body = fetch(srv, "/console", source=OUTSIDE, headers=jar)
        assert status == 200 and b"console.js" in body
        assert fetch(srv, "/console/api/catalog", source=OUTSIDE, headers=jar)[0] == 200
        assert fetch(srv, "/console/api/catalog", source=OUTSIDE, headers={"Cookie": "mcpkit_console=forged"})[0] == 401


def test_proxied_and_cross_origin_requests_are_refused_even_from_loopback() -> None:
    with served("--console") as srv:
        for header in ("X-Forwarded-For", "Forwarded", "X-Real-IP"):
            assert fetch(srv, "/console/api/state", headers={header: "192.0.2.9"})[0] == 403, header
        evil = {"Origin": "http://evil.example"}
        assert fetch(srv, "/console/api/call", method="POST", body=CALL, headers=evil)[0] == 403
        assert fetch(srv, "/console/api/call", method="POST", body=CALL, headers={"Origin": "null"})[0] == 403  # a sandboxed frame
        assert fetch(srv, "/console/api/state", headers={"Origin": "http://localhost:3000"})[0] == 403  # another local site
        assert fetch(srv, "/console/login", method="POST", body=b"token=x", headers=evil)[0] == 403
        own = {"Origin": f"http://127.0.0.1:{srv.port}"}
        assert fetch(srv, "/console/api/call", method="POST", body=CALL, headers=own)[0] == 200


def test_start_refuses_an_mcp_token_as_console_token_and_a_console_on_stdio() -> None:
    proc = subprocess.run([MCPKIT, "serve", "--transport", "http", "--port", "0", "--console", "--console-token", "same",
                           "--auth-token", "same", PLUGIN, "--plugin", "console_plugin"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "console_token must not be the MCP auth_token" in proc.stderr
    proc = subprocess.run([MCPKIT, "serve", "--console", PLUGIN, "--plugin", "console_plugin"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "the console is served over HTTP" in proc.stderr
    proc = subprocess.run([MCPKIT, "serve", "--transport", "http", "--port", "0", "--console", PLUGIN, "--plugin", "console_plugin"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "MCPKIT_CONSOLE_TRUSTED": "not-an-address"})
    assert proc.returncode == 1 and "console_trusted: 'not-an-address'" in proc.stderr


def test_a_viewer_that_stops_reading_is_dropped() -> None:
    with served("--console") as srv:
        slow_reader = socket.socket()
        slow_reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # its window fills soon
        slow_reader.connect(("127.0.0.1", srv.port))
        slow_reader.sendall(f"GET /console/events HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n\r\n".encode())
        assert wait_until(lambda: json.loads(fetch(srv, "/console/api/state")[2])["viewers"] == 1)
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        # calls from a client with a long name (the console keeps 256 characters of it): the
        # server's send buffer (up to 4 MB here) and then the viewer's queue fill
        meta = {**STATELESS_META, "io.modelcontextprotocol/clientInfo": {"name": "c" * 5000, "version": "1"}}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "repeat", "arguments": {"word": "w", "times": 1}, "_meta": meta}})
        headers = {**modern_headers("tools/call", "repeat"), "Accept": ACCEPT, "Content-Type": "application/json"}
        try:
            for n in range(1, 12001):
                conn.request("POST", "/mcp", body=body, headers=headers)
                assert conn.getresponse().read()
                if n % 250 == 0 and json.loads(fetch(srv, "/console/api/state")[2])["dropped_viewers"]:
                    break
            state = json.loads(fetch(srv, "/console/api/state")[2])
            assert state["dropped_viewers"] == 1 and state["viewers"] == 0, (n, state["viewers"])
            assert all(len(c["client"]) == 257 for c in state["recent"])
            print(f"the viewer was dropped after about {n} calls")
        finally:
            conn.close()
            slow_reader.close()


def test_off_the_app_has_no_observer_and_on_it_has_the_consoles() -> None:
    from mcpkit.server.app import App
    from mcpkit.server.registry import Registry
    from mcpkit.server.settings import Settings
    from mcpkit.transports.http.asgi import HttpApp
    from mcpkit.transports.http.console.observer import ConsoleObserver

    off = App(Registry(), Settings())
    assert HttpApp(off).console is None and not off.observers and getattr(off, "console_path", None) is None
    on = App(Registry(), Settings(console=True))
    assert HttpApp(on).console is not None
    assert [type(o) for o in on.observers] == [ConsoleObserver] and on.console_path == "/console"


def test_an_open_event_stream_ends_when_the_server_stops() -> None:
    srv = served("--console")
    with srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        conn.request("GET", "/console/events")
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("content-type") == "text/event-stream"
        assert b"event: hello" in resp.readline() + resp.readline()
        started = time.monotonic()
        assert srv.stop() == 0
        assert time.monotonic() - started < 3  # the stream did not hold the drain for the grace period
        assert resp.read() is not None  # the stream was ended, not cut mid-way
        conn.close()

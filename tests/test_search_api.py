"""POST /mcp/search over a real server, codesearch plugin and SQLite file."""

from __future__ import annotations

import json
import re
import socket
import subprocess

import pytest

import mcpkit_codesearch  # noqa: F401  (the bundled plugin these tests serve: missing, they fail)

from .helpers import MCPKIT
from .http_helpers import HttpServer

pytestmark = pytest.mark.usefixtures("http_server_kind")


@pytest.fixture(scope="module")
def srv(tmp_path_factory, http_server_kind):
    root = tmp_path_factory.mktemp("search")
    repo = root / "repo"
    repo.mkdir()
    (repo / "alpha.py").write_text("def frobnicate(x):\n    return x * 2\n\nprint(frobnicate(21))\n")
    (repo / "beta.txt").write_text("nothing to see\nfrobnicate again here\n")
    db = root / "code.sqlite3"
    env = {"MCPKIT_DATA_DIR": str(root / "data"), "MCPKIT_PLUGIN__CODESEARCH__DATABASE": json.dumps(str(db))}
    import os

    subprocess.run([MCPKIT, "index", str(repo), "--project", "demo", "--database", str(db)], check=True,
                   capture_output=True, env={**os.environ, **env}, timeout=60)
    with HttpServer("--plugin", "codesearch", env=env) as server:
        yield server


def post(srv: HttpServer, body: bytes, headers: dict[str, str] | None = None):
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    status, h, out = srv.call("POST", "/mcp/search", raw=body, headers=hdrs)
    return status, h, json.loads(out) if out else None


def test_search_finds_lines(srv: HttpServer) -> None:
    status, h, out = post(srv, b'{"query": "  frobnicate ", "limit": 2}', {"X-Request-ID": "req-7"})
    assert status == 200 and h["x-mcp-version"] == "2" and h["x-request-id"] == "req-7"
    assert len(out["results"]) == 2 and isinstance(out["took_ms"], (int, float))
    hit = out["results"][0]
    assert hit["project"] == "demo" and hit["path"] == "alpha.py" and hit["line"] == 1
    status, h, out = post(srv, b'{"query": "frobnicate"}')
    assert status == 200 and len(out["results"]) == 3  # default limit 5, three matching lines
    assert re.fullmatch(r"[0-9a-f-]{36}", h["x-request-id"])


@pytest.mark.parametrize(("body", "code"), [
    (b'{"query": "ab"}', "INVALID_QUERY"),
    (b'{"query": "   abc   "}', None),
    (b'{"query": 5}', "INVALID_QUERY"),
    (b'{}', "INVALID_QUERY"),
    (b'{"query": "' + b"x" * 501 + b'"}', "INVALID_QUERY"),
    (b'{"query": "abc", "limit": 1.5}', "INVALID_LIMIT"),
    (b'{"query": "abc", "limit": "5"}', "INVALID_LIMIT"),
    (b'{"query": "abc", "limit": 0}', "INVALID_LIMIT"),
    (b'{"query": "abc", "limit": 21}', "INVALID_LIMIT"),
    (b'{"query": "abc", "limit": true}', "INVALID_LIMIT"),
    (b'{"query": "abc"', "MALFORMED_JSON"),
    (b'[1]', "MALFORMED_JSON"),
])
def test_validation(srv: HttpServer, body: bytes, code: str | None) -> None:
    status, h, out = post(srv, body)
    assert h["x-mcp-version"] == "2"
    if code is None:
        assert status == 200
    else:
        assert status == 400 and out["error"]["code"] == code and out["error"]["message"]


def test_content_type_size_version_and_preflight(srv: HttpServer) -> None:
    status, _, out = post(srv, b'{"query": "abc"}', {"Content-Type": "text/plain"})
    assert status == 400 and out["error"]["code"] == "INVALID_CONTENT_TYPE"
    status, _, out = post(srv, b'{"query": "' + b"a" * 1100 + b'"}')
    assert status == 413 and out["error"]["code"] == "PAYLOAD_TOO_LARGE"
    status, h, _ = post(srv, b'{"query": "frobnicate"}', {"X-MCP-Version": "1"})
    assert status == 200 and h["x-mcp-version"] == "2"  # logged, not refused
    status, h, _ = srv.call("OPTIONS", "/mcp/search", headers={"Origin": "http://localhost:3000"})
    assert status == 204 and h["x-mcp-version"] == "2" and h["access-control-allow-origin"] == "http://localhost:3000"
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
        sock.sendall(b"GET /mcp/search HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert sock.recv(64).split(b" ")[1] == b"405"


def test_no_search_tool_is_a_clear_404() -> None:
    with HttpServer("--plugin", "hello") as srv:  # no codesearch: search_code is missing
        for method in ("POST", "GET"):
            status, h, out = srv.call(method, "/mcp/search", raw=b'{"query": "hello"}')
            assert status == 404 and "retry-after" not in h
            error = json.loads(out)["error"]
            assert error["code"] == "NOT_FOUND" and "search_code" in error["message"] and "search_tool" in error["message"]


@pytest.mark.parametrize("query", ["frob\nnicate", "frob\x00nicate", "tab\there"])
def test_control_characters_are_an_invalid_query(srv: HttpServer, query: str) -> None:
    status, h, out = post(srv, json.dumps({"query": query}).encode())
    assert status == 400 and out["error"]["code"] == "INVALID_QUERY" and "retry-after" not in h


def test_invalid_utf8_is_malformed_json(srv: HttpServer) -> None:
    status, _, out = post(srv, b'{"query": "fro\xffbnicate"}')
    assert status == 400 and out["error"]["code"] == "MALFORMED_JSON"


def test_body_over_the_server_limit_is_a_rest_413(srv: HttpServer) -> None:
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
        sock.sendall(b"POST /mcp/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 5000000\r\n\r\n")
        data = b""
        while b"}}" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"413"
    assert json.loads(body)["error"]["code"] == "PAYLOAD_TOO_LARGE"


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_other_methods_are_a_json_405(srv: HttpServer, method: str) -> None:
    status, h, out = srv.call(method, "/mcp/search", raw=b'{"query": "frobnicate"}')
    assert status == 405 and h["allow"].startswith("POST") and json.loads(out)["error"]["code"] == "METHOD_NOT_ALLOWED"

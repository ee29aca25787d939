"""Whose token is it, and for which server: the audience a loopback server accepts (scheme, host
and port of the socket it serves on, never a Host header's say-so), client-credentials
principals kept apart from users of the same name, and what the command-line client suggests
when a server wants a token.

Tokens are signed by the key server the tests control (tests/auth_fixtures.KeyServer) and
checked through its JWKS by real `mcpkit serve` processes on loopback ports; the
client-credentials case is also run against the real authorization server
(tests/oauth_server.py) through introspection.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import httpx
import pytest

from .auth_fixtures import AuthServer, KeyServer, auth_server, keys, scoped_env  # noqa: F401 (fixtures)
from .helpers import MCPKIT, modern_meta
from .http_helpers import INIT, HttpServer, modern_headers, sse_events

PRM = "/.well-known/oauth-protected-resource/mcp"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}


def jwt_env(scoped_env: dict[str, str], keys: KeyServer) -> dict[str, str]:
    return {**scoped_env, "MCPKIT_AUTH__JWKS_URI": keys.url, "MCPKIT_AUTH__JWKS_MIN_REFRESH_S": "0",
            "MCPKIT_LOG_LEVEL": "info"}


def jwt_server(scoped_env: dict[str, str], keys: KeyServer, *args: str) -> HttpServer:
    return HttpServer("--plugin", "scoped", "--auth", "jwt", "--auth-issuer", KeyServer.ISSUER, *args,
                      env=jwt_env(scoped_env, keys))


@pytest.fixture(scope="module")
def rs(http_server_kind, keys, scoped_env):
    with jwt_server(scoped_env, keys) as srv:
        yield srv


def bearer(token: str, **more: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **more}


def url(srv: HttpServer, host: str = "127.0.0.1", scheme: str = "http") -> str:
    return f"{scheme}://{host}:{srv.port}/mcp"


def without_sub(claims: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in claims.items() if k != "sub"}


# -- the audience on loopback --------------------------------------------------------------

def test_a_token_for_another_local_server_is_refused_whatever_the_host_header_says(
        http_server_kind, rs: HttpServer, keys: KeyServer, scoped_env) -> None:
    with jwt_server(scoped_env, keys) as other:
        for name in ("127.0.0.1", "localhost"):
            theirs = keys.token(keys.claims(url(other, name)))
            host = f"{name}:{other.port}"
            # the control: the token is good where it was issued for
            assert other.call("POST", "/mcp", INITIALIZE, bearer(theirs, Host=host))[0] == 200
            # replayed here, claiming in the Host header to be the other server
            status, h, reply = rs.call("POST", "/mcp", INITIALIZE, bearer(theirs, Host=host))
            assert status == 401, f"{name}: a token for port {other.port} was accepted on port {rs.port}: {reply!r}"
            assert 'error="invalid_token"' in h["www-authenticate"] and b"audience" in reply
            # and the metadata names this server, not the one the Host header names
            doc = json.loads(rs.call("GET", PRM, headers={"Host": host})[2])
            assert doc["resource"] == url(rs)
            assert f":{rs.port}/" in h["www-authenticate"] and f":{other.port}/" not in h["www-authenticate"]


def test_the_scheme_and_port_must_match_and_each_loopback_name_works(rs: HttpServer, keys: KeyServer) -> None:
    for aud in (url(rs, scheme="https"), f"http://127.0.0.1:{rs.port + 1}/mcp", f"http://127.0.0.1/mcp",
                f"http://127.0.0.2:{rs.port}/mcp", f"http://[::1]:{rs.port}/mcp"):
        token = keys.token(keys.claims(aud))
        assert rs.call("POST", "/mcp", INITIALIZE, bearer(token))[0] == 401, aud
    # the names a client may use for this server: its token is for the URL it used, and the
    # metadata it reads there agrees
    for name in ("127.0.0.1", "localhost", "LOCALHOST"):
        host = f"{name}:{rs.port}"
        own = url(rs, name.lower())
        assert json.loads(rs.call("GET", PRM, headers={"Host": host})[2])["resource"] == own
        assert rs.call("POST", "/mcp", INITIALIZE, bearer(keys.token(keys.claims(own)), Host=host))[0] == 200, name


def test_an_ipv6_loopback_server_takes_tokens_for_its_own_address(http_server_kind, keys: KeyServer, scoped_env) -> None:
    with jwt_server(scoped_env, keys, "--host", "::1") as srv:
        assert srv.host == "::1"
        own = url(srv, "[::1]")
        assert json.loads(srv.call("GET", PRM)[2])["resource"] == own
        assert srv.call("POST", "/mcp", INITIALIZE, bearer(keys.token(keys.claims(own))))[0] == 200
        for aud in (url(srv, "127.0.0.1"), f"http://[::1]:{srv.port + 1}/mcp"):
            assert srv.call("POST", "/mcp", INITIALIZE, bearer(keys.token(keys.claims(aud))))[0] == 401, aud


def test_a_public_bind_without_a_resource_url_refuses_to_start_in_one_line(scoped_env) -> None:
    for args in (["--auth", "jwt", "--auth-issuer", "https://i"], ["--auth-token", "dev-secret"]):
        run = subprocess.run([MCPKIT, "serve", "--transport", "http", "--host", "0.0.0.0", "--port", "0", "--plugin", "scoped", *args],
                             capture_output=True, text=True, timeout=30, env={**__import__("os").environ, **scoped_env})
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        assert run.returncode != 0 and "serving MCP" not in run.stderr, (args, run.stderr)
        assert len(lines) == 1 and "--auth-resource" in lines[0] and "Traceback" not in run.stderr, (args, run.stderr)


# -- client-credentials principals ---------------------------------------------------------

def tasks_meta() -> dict[str, Any]:
    meta = modern_meta()
    meta["io.modelcontextprotocol/clientCapabilities"] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    return meta


def start_task(srv: HttpServer, token: str) -> str:
    headers = {**modern_headers("tools/call", "long_job"), **bearer(token)}
    reply = srv.rpc("tools/call", {"name": "long_job", "arguments": {"seconds": 30}, "_meta": tasks_meta()}, headers=headers)[2]
    assert "result" in reply, reply
    return reply["result"]["taskId"]


def task_call(srv: HttpServer, method: str, task_id: str, token: str) -> dict[str, Any]:
    headers = {**modern_headers(method, task_id), **bearer(token)}
    return srv.rpc(method, {"taskId": task_id, "_meta": tasks_meta()}, headers=headers)[2]


def assert_kept_apart(srv: HttpServer, alice: str, client: str) -> None:
    """``client`` (a token of a client whose id is alice's name) reaches nothing of alice's:
    not her tasks, not her Streamable HTTP session, not her legacy SSE session."""
    task_id = start_task(srv, alice)
    for method in ("tasks/get", "tasks/cancel"):
        reply = task_call(srv, method, task_id, client)
        assert reply.get("error", {}).get("code") == -32602, f"{method}: the client reached alice's task: {reply}"
    assert task_call(srv, "tasks/get", task_id, alice)["result"]["status"] == "working"
    theirs = start_task(srv, client)  # and the other way round
    assert task_call(srv, "tasks/get", theirs, alice)["error"]["code"] == -32602
    task_call(srv, "tasks/cancel", theirs, client)
    task_call(srv, "tasks/cancel", task_id, alice)

    _, h, _ = srv.rpc("initialize", INIT, headers=bearer(alice))
    sid = h["mcp-session-id"]
    as_client = bearer(client, **{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    assert srv.rpc("tools/list", headers=as_client)[0] == 404
    assert srv.call("GET", "/mcp", headers={**as_client, "Accept": "text/event-stream"})[0] == 404
    assert srv.call("DELETE", "/mcp", headers=as_client)[0] == 404
    assert srv.rpc("tools/list", headers=bearer(alice, **{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}))[0] == 200

    c = srv.conn()
    c.request("GET", "/sse", headers=bearer(alice, Accept="text/event-stream"))
    events = sse_events(c.getresponse())
    endpoint = next(events)["data"]
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert srv.call("POST", endpoint, ping, bearer(client))[0] == 404
    assert srv.call("POST", endpoint, ping, bearer(alice))[0] == 202
    c.close()


def test_a_client_id_is_not_the_user_of_the_same_name(rs: HttpServer, keys: KeyServer) -> None:
    alice = keys.token(keys.claims(url(rs)))  # sub alice, through client test-client
    for claim in ("client_id", "azp"):
        claims = without_sub(keys.claims(url(rs)))
        claims.pop("client_id")
        client = keys.token({**claims, claim: "alice"})
        # the client is served (as itself) ...
        who = rs.rpc("tools/call", {"name": "whoami", "arguments": {}, "_meta": modern_meta()},
                     headers={**modern_headers("tools/call", "whoami"), **bearer(client)})[2]["result"]["structuredContent"]
        assert who["client_id"] == "alice"
        # ... and is not alice
        assert_kept_apart(rs, alice, client)


def test_a_token_naming_neither_a_subject_nor_a_client_is_refused(rs: HttpServer, keys: KeyServer) -> None:
    nobody = without_sub(keys.claims(url(rs)))
    nobody.pop("client_id")
    for claims in (nobody, {**nobody, "sub": ""}, {**nobody, "client_id": ""}):
        status, h, reply = rs.call("POST", "/mcp", INITIALIZE, bearer(keys.token(claims)))
        assert status == 401 and 'error="invalid_token"' in h["www-authenticate"], (claims, reply)


def test_a_client_credentials_token_from_a_real_issuer_is_not_its_namesake(auth_server: AuthServer, scoped_env) -> None:
    """The real authorization server answers introspection for client-credentials tokens
    without a ``sub`` (RFC 7662 makes it optional); its client "alice" is not its user alice."""
    env = {**scoped_env, "MCPKIT_AUTH__INTROSPECTION_ENDPOINT": f"{auth_server.issuer}/introspect",
           "MCPKIT_AUTH__CLIENT_ID": "rs", "MCPKIT_AUTH__CLIENT_SECRET": "rs-secret", "MCPKIT_AUTH__ISSUER": auth_server.issuer}
    with HttpServer("--plugin", "scoped", "--auth", "introspection", env=env) as srv:
        def grant(**form: str) -> str:
            resp = httpx.post(f"{auth_server.issuer}/token", data={**form, "resource": url(srv), "scope": "tools:read"},
                              auth=("alice", "alice-secret"), timeout=10)
            assert resp.status_code == 200, resp.text
            return resp.json()["access_token"]

        client = grant(grant_type="client_credentials")
        alice = auth_server.user_token(url(srv))
        assert_kept_apart(srv, alice, client)


# -- what the command-line client suggests -------------------------------------------------

def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MCPKIT, "tools", *args], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in __import__("os").environ.items() if k != "MCPKIT_CLIENT_TOKEN"})


def test_the_client_suggests_the_option_that_works(http_server_kind, keys: KeyServer, scoped_env) -> None:
    with HttpServer("--plugin", "scoped", "--auth-token", "dev-secret", env=scoped_env) as static:
        run = cli(url(static))
        assert run.returncode == 2 and "--auth-token" in run.stderr and "--oauth" not in run.stderr, run.stderr
        run = cli(url(static), "--auth-token", "wrong")
        assert run.returncode == 2 and "--oauth" not in run.stderr, run.stderr
        assert cli(url(static), "--auth-token", "dev-secret").returncode == 0
    with jwt_server(scoped_env, keys) as oauth:
        run = cli(url(oauth))
        assert run.returncode == 2 and "--oauth" in run.stderr, run.stderr

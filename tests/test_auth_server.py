"""`mcpkit serve` as an OAuth resource server, on both HTTP servers: metadata and challenges,
hostile tokens, key rotation, the issuer being down, scopes per tool/resource/prompt, sessions
bound to their owner, and a verifier from a provider plugin.

Tokens here are signed by a key server the tests control (tests/auth_fixtures.KeyServer), so
any claim can be forged the way an attacker would try; the flows with a real authorization
server are in test_auth_flows.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from .auth_fixtures import KeyServer, dead_url, keys, scoped_env  # noqa: F401 (fixtures)
from .helpers import modern_meta
from .http_helpers import INIT, HttpServer, modern_headers

pytestmark = pytest.mark.usefixtures("http_server_kind")


@pytest.fixture(scope="module")
def rs(http_server_kind, keys, scoped_env):
    env = {**scoped_env, "MCPKIT_AUTH__JWKS_URI": keys.url, "MCPKIT_AUTH__JWKS_MIN_REFRESH_S": "0",
           "MCPKIT_AUTH__LEEWAY_S": "5", "MCPKIT_LOG_LEVEL": "info"}
    with HttpServer("--plugin", "scoped", "--auth", "jwt", "--auth-issuer", KeyServer.ISSUER, env=env) as srv:
        yield srv


def resource(srv: HttpServer) -> str:
    return f"http://127.0.0.1:{srv.port}/mcp"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def stateless(srv: HttpServer, method: str, params: dict, token: str | None, name: str | None = None):
    headers = {**modern_headers(method, name), **(bearer(token) if token else {})}
    return srv.rpc(method, {**params, "_meta": modern_meta()}, headers=headers)


def challenge(headers: dict[str, str]) -> dict[str, str]:
    value = headers["www-authenticate"]
    assert value.startswith("Bearer ")
    from mcpkit.client.oauth.flow import auth_challenge

    found, dpop = auth_challenge(value)
    assert found is not None and found.scheme == "bearer" and not dpop
    return found.params


def test_metadata_and_the_401_challenge(rs: HttpServer) -> None:
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        status, h, body = rs.call("GET", path)
        doc = json.loads(body)
        assert status == 200 and h["content-type"] == "application/json"
        assert doc["resource"] == resource(rs) and doc["authorization_servers"] == [KeyServer.ISSUER]
        assert {"tools:read", "tools:write", "admin"} <= set(doc["scopes_supported"])
        assert doc["bearer_methods_supported"] == ["header"]
    status, h, body = rs.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
    params = challenge(h)
    assert status == 401 and json.loads(body)["error"]["message"].startswith("Unauthorized")
    assert params == {"resource_metadata": f"http://127.0.0.1:{rs.port}/.well-known/oauth-protected-resource/mcp"}
    assert rs.call("GET", "/sse", headers={"Accept": "text/event-stream"})[0] == 401
    assert rs.call("POST", "/mcp", {}, {"Authorization": "Basic YTpi"})[0] == 401
    assert rs.call("GET", "/healthz")[0] == 200  # no token needed
    status, h, _ = rs.call("OPTIONS", "/mcp", headers={"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"})
    assert status == 204 and "Authorization" in h["access-control-allow-headers"]
    status, h, _ = rs.call("POST", "/mcp", {}, {"Origin": "http://localhost:3000"})
    assert status == 401 and "WWW-Authenticate" in h["access-control-expose-headers"]


def hostile_tokens(keys: KeyServer, aud: str) -> dict[str, str]:
    good = keys.claims(aud)
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "JWT", "kid": keys.rsa_kid}).encode()).rstrip(b"=")
    payload = base64.urlsafe_b64encode(json.dumps(good).encode()).rstrip(b"=")
    unsigned = (header + b"." + payload + b".").decode()
    valid = keys.token(good)
    head, body, sig = valid.split(".")
    tampered_sig = sig[:-4] + ("AAAA" if not sig.endswith("AAAA") else "BBBB")
    # HS256 "signed" with the published RSA public key as the HMAC secret (key confusion)
    hs_header = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "typ": "JWT", "kid": keys.rsa_kid}).encode()).rstrip(b"=")
    signing_input = hs_header + b"." + payload
    forged = base64.urlsafe_b64encode(hmac.new(keys.public_pem(), signing_input, hashlib.sha256).digest()).rstrip(b"=")
    confused = (signing_input + b"." + forged).decode()
    port = int(aud.rsplit(":", 1)[1].split("/")[0])
    nobody = {k: v for k, v in good.items() if k not in ("sub", "client_id")}
    return {
        "expired": keys.token(keys.claims(aud, exp=int(good["iat"]) - 600, iat=int(good["iat"]) - 1200)),
        "not yet valid": keys.token(keys.claims(aud, nbf=int(good["iat"]) + 600)),
        "wrong issuer": keys.token(keys.claims(aud, iss="https://evil.example")),
        "wrong audience": keys.token(keys.claims("https://other.example/mcp")),
        "another local server's audience": keys.token(keys.claims(f"http://127.0.0.1:{port + 1}/mcp")),
        "this port, another scheme": keys.token(keys.claims(f"https://127.0.0.1:{port}/mcp")),
        "this port, another loopback address": keys.token(keys.claims(f"http://127.0.0.2:{port}/mcp")),
        "no port": keys.token(keys.claims("http://127.0.0.1/mcp")),
        "neither sub nor client id": keys.token(nobody),
        "empty sub and client id": keys.token({**nobody, "sub": "", "client_id": ""}),
        "sub not a string": keys.token({**good, "sub": 42}),
        "sub null, client id present": keys.token({**good, "sub": None}),
        "bad signature": f"{head}.{body}.{tampered_sig}",
        "unknown signer": keys.token(good, key="other"),
        "alg none": unsigned,
        "HS/RS key confusion": confused,
        "no exp": keys.token({k: v for k, v in good.items() if k != "exp"}),
        "EC key, RS alg header": keys.token(good, key="ec", alg="ES256", kid=keys.rsa_kid),
        "oversized": keys.token(keys.claims(aud, padding="x" * 9000)),
        "garbage": "not-a-jwt",
        "three dots of garbage": "a.b.c",
        "binary-looking": "////++++====",
        "quotes": 'abc"def',
    }


def test_hostile_tokens_are_all_401_and_never_logged(rs: HttpServer, keys: KeyServer) -> None:
    aud = resource(rs)
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}
    tokens = hostile_tokens(keys, aud)
    for name, token in tokens.items():
        status, h, reply = rs.call("POST", "/mcp", body, bearer(token))
        assert status == 401, f"{name}: HTTP {status} {reply!r}"
        params = challenge(h)
        assert params["error"] == "invalid_token" and params["resource_metadata"].endswith("/oauth-protected-resource/mcp"), name
        assert token not in h["www-authenticate"] and token.encode() not in reply, name
        assert json.loads(reply)["error"]["code"] == -32600, name
    # the control: a good token passes
    status, _, _ = rs.call("POST", "/mcp", body, bearer(keys.token(keys.claims(aud))))
    assert status == 200
    log = rs.stderr.decode(errors="replace")
    assert "Traceback" not in log and " 500 " not in log
    for name, token in tokens.items():
        secret_part = token.split(".")[-1] if token.count(".") == 2 and len(token.split(".")[-1]) > 8 else token
        assert secret_part not in log, f"{name} leaked into the log"
    assert "refused a bearer token" in log


def test_scopes_filter_lists_and_challenge_calls(rs: HttpServer, keys: KeyServer) -> None:
    reader = keys.token(keys.claims(resource(rs), scope="tools:read"))
    status, _, reply = stateless(rs, "tools/list", {}, reader)
    assert status == 200 and [t["name"] for t in reply["result"]["tools"]] == ["whoami", "read_notes", "long_job"]
    uris = [r["uri"] for r in stateless(rs, "resources/list", {}, reader)[2]["result"]["resources"]]
    assert uris == ["notes://public"]
    assert stateless(rs, "prompts/get", {"name": "summarize", "arguments": {"topic": "x"}}, reader, "summarize")[0] == 200
    who = stateless(rs, "tools/call", {"name": "whoami", "arguments": {}}, reader, "whoami")[2]["result"]["structuredContent"]
    assert who == {"subject": "alice", "client_id": "test-client", "scopes": ["tools:read"], "issuer": KeyServer.ISSUER,
                   "audience": resource(rs)}
    status, h, reply = stateless(rs, "tools/call", {"name": "write_note", "arguments": {"text": "x"}}, reader, "write_note")
    params = challenge(h)
    assert status == 403 and params["error"] == "insufficient_scope" and params["scope"] == "tools:write"
    assert params["resource_metadata"] == f"http://127.0.0.1:{rs.port}/.well-known/oauth-protected-resource/mcp"
    assert reply["error"]["code"] == -32003 and reply["error"]["data"] == {"requiredScopes": ["tools:write"]}
    status, h, _ = stateless(rs, "resources/read", {"uri": "notes://secret"}, reader, "notes://secret")
    assert status == 403 and challenge(h)["scope"] == "admin"
    # the same in a session (handshake era)
    status, h, reply = rs.rpc("initialize", INIT, headers=bearer(reader))
    sid = h["mcp-session-id"]
    session = {**bearer(reader), "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    assert rs.rpc("notifications/initialized", headers=session, rid=None)[0] == 202
    assert [t["name"] for t in rs.rpc("tools/list", headers=session)[2]["result"]["tools"]] == ["whoami", "read_notes", "long_job"]
    status, h, reply = rs.rpc("tools/call", {"name": "reset", "arguments": {}}, headers=session)
    assert status == 403 and challenge(h)["scope"] == "admin" and reply["error"]["code"] == -32003
    # an admin token: the scope hierarchy is the server's (scope_implies), here flat
    admin = keys.token(keys.claims(resource(rs), scope="tools:read tools:write admin"))
    names = [t["name"] for t in stateless(rs, "tools/list", {}, admin)[2]["result"]["tools"]]
    assert names == ["whoami", "read_notes", "write_note", "reset", "long_job"]
    assert stateless(rs, "tools/call", {"name": "reset", "arguments": {}}, admin, "reset")[2]["result"]["content"][0]["text"] == "reset"


def test_sessions_belong_to_who_opened_them(rs: HttpServer, keys: KeyServer) -> None:
    alice = keys.token(keys.claims(resource(rs)))
    bob = keys.token(keys.claims(resource(rs), sub="bob"))
    _, h, _ = rs.rpc("initialize", INIT, headers=bearer(alice))
    sid = h["mcp-session-id"]
    as_bob = {**bearer(bob), "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    assert rs.rpc("tools/list", headers=as_bob)[0] == 404
    assert rs.call("GET", "/mcp", headers={**as_bob, "Accept": "text/event-stream"})[0] == 404
    assert rs.call("DELETE", "/mcp", headers=as_bob)[0] == 404
    as_alice = {**bearer(alice), "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    assert rs.rpc("tools/list", headers=as_alice)[0] == 200
    assert rs.call("DELETE", "/mcp", headers=as_alice)[0] == 200


def test_tasks_belong_to_the_principal_across_tokens(rs: HttpServer, keys: KeyServer) -> None:
    meta = modern_meta()
    meta["io.modelcontextprotocol/clientCapabilities"] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}

    def call(method: str, params: dict, token: str, name: str) -> dict:
        headers = {**modern_headers(method, name), **bearer(token)}
        return rs.rpc(method, {**params, "_meta": meta}, headers=headers)[2]

    alice = keys.token(keys.claims(resource(rs)))
    task_id = call("tools/call", {"name": "long_job", "arguments": {"seconds": 30}}, alice, "long_job")["result"]["taskId"]
    bob = keys.token(keys.claims(resource(rs), sub="bob"))
    assert call("tasks/get", {"taskId": task_id}, bob, task_id)["error"]["code"] == -32602  # not bob's
    alice_again = keys.token(keys.claims(resource(rs), jti="another-token"))  # a refreshed token
    assert call("tasks/get", {"taskId": task_id}, alice_again, task_id)["result"]["status"] == "working"
    assert "result" in call("tasks/cancel", {"taskId": task_id}, alice_again, task_id)


def test_key_rotation_is_picked_up(rs: HttpServer, keys: KeyServer) -> None:
    old = keys.token(keys.claims(resource(rs)))
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}
    assert rs.call("POST", "/mcp", body, bearer(old))[0] == 200
    keys.rotate()
    new = keys.token(keys.claims(resource(rs)))
    assert rs.call("POST", "/mcp", body, bearer(new))[0] == 200  # unknown kid: the set is fetched again
    assert rs.call("POST", "/mcp", body, bearer(old))[0] == 401  # its key is gone


def test_issuer_unreachable_is_503_with_a_logged_reason(http_server_kind, keys: KeyServer, scoped_env) -> None:
    env = {**scoped_env, "MCPKIT_AUTH__JWKS_URI": dead_url(), "MCPKIT_AUTH__TIMEOUT_S": "2", "MCPKIT_LOG_LEVEL": "info"}
    with HttpServer("--plugin", "scoped", "--auth", "jwt", "--auth-issuer", KeyServer.ISSUER, env=env) as srv:
        token = keys.token(keys.claims(resource(srv)))
        status, h, reply = srv.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, bearer(token))
        assert status == 503 and h["retry-after"] == "5" and json.loads(reply)["error"]["code"] == -32603
    env = {**scoped_env, "MCPKIT_AUTH__INTROSPECTION_ENDPOINT": dead_url(), "MCPKIT_AUTH__TIMEOUT_S": "2",
           "MCPKIT_LOG_LEVEL": "info"}
    with HttpServer("--plugin", "scoped", "--auth", "introspection", env=env) as srv2:
        status, _, _ = srv2.call("POST", "/mcp", {}, bearer("opaque-token-123"))
        assert status == 503
    for server in (srv, srv2):
        log = server.stderr.decode(errors="replace")
        assert "token verification unavailable" in log and "could not be fetched" in log
        assert token.split(".")[-1] not in log and "opaque-token-123" not in log


def test_a_provider_plugin_verifies_and_required_scopes_hold(http_server_kind, scoped_env) -> None:
    env = {**scoped_env, "MCPKIT_AUTH__REQUIRED_SCOPES": "tools:read", "MCPKIT_AUTH__SCOPE_IMPLIES": '{"tools:write": ["tools:read"]}'}
    with HttpServer("--plugin", "scoped", "--auth", "letmein", env=env) as srv:
        status, h, _ = srv.call("POST", "/mcp", {})
        assert status == 401 and challenge(h)["scope"] == "tools:read"
        status, h, _ = stateless(srv, "tools/list", {}, "letmein.carol.")
        assert status == 403 and challenge(h) == {**challenge(h), "error": "insufficient_scope", "scope": "tools:read"}
        assert stateless(srv, "tools/list", {}, "nope.carol.x")[0] == 401
        status, _, reply = stateless(srv, "tools/call", {"name": "whoami", "arguments": {}}, "letmein.carol.tools~write", "whoami")
        assert reply["result"]["structuredContent"]["scopes"] == ["tools:read", "tools:write"]  # implied


def test_the_static_development_token(http_server_kind, scoped_env) -> None:
    with HttpServer("--plugin", "scoped", "--auth-token", "dev-secret", env=scoped_env) as srv:
        assert stateless(srv, "tools/list", {}, None)[0] == 401
        assert stateless(srv, "tools/list", {}, "wrong")[0] == 401
        names = [t["name"] for t in stateless(srv, "tools/list", {}, "dev-secret")[2]["result"]["tools"]]
        assert names == ["whoami", "read_notes", "write_note", "reset", "long_job"]  # it may do everything
    env = {**scoped_env, "MCPKIT_AUTH__TOKEN_SCOPES": "tools:read"}
    with HttpServer("--plugin", "scoped", "--auth-token", "dev-secret", env=env) as srv:
        assert stateless(srv, "tools/call", {"name": "reset", "arguments": {}}, "dev-secret", "reset")[0] == 403


def test_bad_settings_refuse_to_start(scoped_env) -> None:
    import subprocess

    from .helpers import MCPKIT

    for args, message in ((["--auth", "jwt"], "needs auth.issuer"), (["--auth", "nope"], "unknown token verifier"),
                          (["--auth", "jwt", "--auth-issuer", "https://i", "--host", "0.0.0.0"], "--auth-resource"),
                          (["--auth", "introspection"], "needs auth.introspection_endpoint")):
        run = subprocess.run([MCPKIT, "serve", "--transport", "http", "--port", "0", "--plugin", "scoped", *args],
                             capture_output=True, text=True, timeout=30, env={**__import__("os").environ, **scoped_env})
        assert run.returncode != 0 and message in run.stderr and "Traceback" not in run.stderr, (args, run.stderr)


def test_any_bearer_value_is_a_clean_refusal(rs: HttpServer) -> None:
    """Whatever follows "Bearer " (printable header text), the answer is a 401 with a
    challenge: never a 500, never the value echoed back."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    alphabet = st.characters(min_codepoint=0x21, max_codepoint=0x7E)
    # what every refusal says anyway: a value that is part of it (say "error_de") is not an echo
    _, ref_headers, ref_reply = rs.call("POST", "/mcp", {}, {"Authorization": "Bearer q"})
    fixed = ref_headers["www-authenticate"].encode() + ref_reply

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.one_of(st.text(alphabet, min_size=1, max_size=300),
                     st.lists(st.text(alphabet, min_size=1, max_size=60), min_size=3, max_size=3).map(".".join)))
    def check(value: str) -> None:
        status, h, reply = rs.call("POST", "/mcp", {}, {"Authorization": f"Bearer {value}"})
        assert status == 401 and challenge(h)["error"] == "invalid_token"
        if len(value) >= 8 and value.encode() not in fixed:  # shorter ones turn up in any text by chance
            assert value not in h["www-authenticate"] and value.encode() not in reply

    check()

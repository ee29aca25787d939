"""The whole OAuth flow against `mcpkit serve` with a real authorization server (Authlib, in
its own process; tests/oauth_server.py): mcpkit.client and the official SDK client sign in,
step up to more scopes, refresh expired tokens, and lose access when the token is revoked
(introspection); the CLI keeps its tokens in a file between runs."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
import urllib.parse
from typing import Any

import httpx
import pytest
import trio

import mcpkit.client as mc
from mcpkit.client.oauth import LoopbackAuthorizer, MemoryTokenStore, OAuth

from .auth_fixtures import AuthServer, auth_server, browser, scoped_env  # noqa: F401 (fixtures)
from .helpers import MCPKIT, modern_meta
from .http_helpers import HttpServer, modern_headers


@pytest.fixture(scope="module")
def rs(auth_server, scoped_env):
    """Tokens checked against the issuer's JWKS; clients are told to start with tools:read."""
    env = {**scoped_env, "MCPKIT_AUTH__SCOPES_SUPPORTED": "tools:read", "MCPKIT_AUTH__LEEWAY_S": "0"}
    with HttpServer("--plugin", "scoped", "--auth", "jwt", "--auth-issuer", auth_server.issuer, env=env) as srv:
        yield srv


@pytest.fixture(autouse=True)
def default_settings(auth_server):
    auth_server.settings(access_token_lifetime=3600, max_scopes=None)
    mc.forget_eras()


def url_of(srv: HttpServer) -> str:
    return f"http://127.0.0.1:{srv.port}/mcp"


def raw_call(srv: HttpServer, token: str) -> int:
    """A stateless tools/call of whoami with ``token``: the HTTP status."""
    headers = {**modern_headers("tools/call", "whoami"), "Authorization": f"Bearer {token}"}
    return srv.rpc("tools/call", {"name": "whoami", "arguments": {}, "_meta": modern_meta()}, headers=headers)[0]


async def saved_token(store: MemoryTokenStore, url: str) -> str:
    entry = await store.get(f"tokens {url}")
    assert entry is not None
    return entry["tokens"]["access_token"]


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_mcpkit_client_signs_in_and_steps_up(rs: HttpServer, auth_server: AuthServer, version: str) -> None:
    url = url_of(rs)

    async def run() -> dict[str, Any]:
        authorizer = LoopbackAuthorizer(open_url=browser)
        try:
            async with mc.connect(url, protocol_version=version, oauth=OAuth(authorizer=authorizer)) as client:
                names = [t["name"] for t in await client.list_tools()]
                who = (await client.call_tool("whoami", {})).structured
                saved = (await client.call_tool("write_note", {"text": "hi"})).text  # 403, then step-up
                after = [t["name"] for t in await client.list_tools(refresh=True)]
                reset = None
                try:
                    await client.call_tool("reset", {})
                except mc.McpError as exc:
                    reset = exc
                return {"names": names, "who": who, "saved": saved, "after": after, "reset": reset}
        finally:
            await authorizer.aclose()

    before = auth_server.stats().get("authorization_code", 0)
    out = trio.run(run)
    assert out["names"] == ["whoami", "read_notes", "long_job"]  # the token holds tools:read only
    assert out["who"]["subject"] == "alice" and out["who"]["audience"] == url and out["who"]["scopes"] == ["tools:read"]
    assert out["saved"] == "saved: hi"
    assert out["after"] == ["whoami", "read_notes", "write_note", "long_job"]
    # step-up asked for the union: tools:read stays; "reset" needs admin, which the user grants
    # too (the fixture grants what is asked), so the last call went through a third sign-in
    assert out["reset"] is None
    assert auth_server.stats()["authorization_code"] - before == 3


def test_step_up_stops_when_the_user_will_not_grant(rs: HttpServer, auth_server: AuthServer) -> None:
    auth_server.settings(max_scopes=["tools:read"])  # the user never grants more

    async def run() -> mc.McpError:
        authorizer = LoopbackAuthorizer(open_url=browser)
        try:
            async with mc.connect(url_of(rs), oauth=OAuth(authorizer=authorizer)) as client:
                with pytest.raises(mc.McpError) as caught:
                    await client.call_tool("write_note", {"text": "x"})
                return caught.value
        finally:
            await authorizer.aclose()

    before = auth_server.stats().get("authorization_code", 0)
    err = trio.run(run)
    assert isinstance(err, mc.Forbidden) and err.http_status == 403 and err.required_scopes == ["tools:write"]
    assert auth_server.stats()["authorization_code"] - before <= 3  # bounded, not a loop


def test_expired_tokens_are_refreshed(rs: HttpServer, auth_server: AuthServer) -> None:
    auth_server.settings(access_token_lifetime=2)
    store = MemoryTokenStore()

    async def run() -> tuple[str, str, str]:
        authorizer = LoopbackAuthorizer(open_url=browser)
        try:
            async with mc.connect(url_of(rs), oauth=OAuth(authorizer=authorizer, store=store)) as client:
                await client.call_tool("whoami", {})
                first = await saved_token(store, url_of(rs))
                await trio.sleep(2.2)
                text = (await client.call_tool("read_notes", {})).text
                return first, await saved_token(store, url_of(rs)), text
        finally:
            await authorizer.aclose()

    before = auth_server.stats()
    first, second, text = trio.run(run)
    after = auth_server.stats()
    assert text == "note 1; note 2" and first != second
    assert after.get("refresh_token", 0) - before.get("refresh_token", 0) >= 1
    assert after["authorization_code"] - before.get("authorization_code", 0) == 1  # no second sign-in
    assert raw_call(rs, first) == 401  # the old one has expired at the server too


def test_revoked_tokens_stop_working_with_introspection(auth_server: AuthServer, scoped_env) -> None:
    env = {**scoped_env, "MCPKIT_AUTH__INTROSPECTION_ENDPOINT": f"{auth_server.issuer}/introspect",
           "MCPKIT_AUTH__CLIENT_ID": "rs", "MCPKIT_AUTH__CLIENT_SECRET": "rs-secret",
           "MCPKIT_AUTH__ISSUER": auth_server.issuer, "MCPKIT_AUTH__INTROSPECTION_CACHE_S": "1"}
    store = MemoryTokenStore()
    with HttpServer("--plugin", "scoped", "--auth", "introspection", env=env) as srv:
        url = url_of(srv)

        async def sign_in() -> str:
            async with mc.connect(url, oauth=OAuth(authorizer=LoopbackAuthorizer(open_url=browser), store=store)) as client:
                assert (await client.call_tool("whoami", {})).structured["subject"] == "alice"
            return await saved_token(store, url)

        token = trio.run(sign_in)
        client_id = trio.run(store.get, f"tokens {url}")["client"]["client_id"]
        assert raw_call(srv, token) == 200
        assert auth_server.revoke(token, client_id) == 200
        trio.run(trio.sleep, 1.1)  # the introspection cache
        assert raw_call(srv, token) == 401

        async def again() -> str:
            async with mc.connect(url, oauth=OAuth(authorizer=LoopbackAuthorizer(open_url=browser), store=store)) as client:
                return (await client.call_tool("whoami", {})).structured["subject"]

        before = auth_server.stats()["authorization_code"]
        assert trio.run(again) == "alice"  # 401, refresh refused (revoked too), signed in anew
        assert auth_server.stats()["authorization_code"] == before + 1
        log = srv.stderr.decode(errors="replace")
        assert token not in log


def test_official_sdk_client_completes_the_flow(rs: HttpServer) -> None:
    import httpx2
    from mcp import ClientSession
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

    class Storage:
        tokens: Any = None
        client: Any = None

        async def get_tokens(self) -> Any:
            return self.tokens

        async def set_tokens(self, tokens: Any) -> None:
            self.tokens = tokens

        async def get_client_info(self) -> Any:
            return self.client

        async def set_client_info(self, info: Any) -> None:
            self.client = info

    redirect = "http://localhost:3031/callback"
    landed: list[str] = []

    async def redirect_handler(authorization_url: str) -> None:
        async with httpx2.AsyncClient(follow_redirects=False) as http:
            landed.append((await http.get(authorization_url)).headers["location"])

    async def callback_handler() -> AuthorizationCodeResult:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(landed[-1]).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0], iss=query.get("iss", [None])[0])

    async def run() -> tuple[list[str], Any, str]:
        provider = OAuthClientProvider(
            server_url=url_of(rs), storage=Storage(), redirect_handler=redirect_handler, callback_handler=callback_handler,
            client_metadata=OAuthClientMetadata(client_name="sdk-test", redirect_uris=[redirect],
                                                grant_types=["authorization_code", "refresh_token"]))
        async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
            async with streamable_http_client(url_of(rs), http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    names = [t.name for t in (await session.list_tools()).tools]
                    who = (await session.call_tool("whoami", {})).structured_content
                    saved = await session.call_tool("write_note", {"text": "sdk"})  # the SDK steps up too
                    return names, who, saved.content[0].text

    names, who, saved = asyncio.run(run())
    assert names == ["whoami", "read_notes", "long_job"]
    assert who["subject"] == "alice" and who["audience"] == url_of(rs)
    assert saved == "saved: sdk"


def test_cli_signs_in_once_and_keeps_the_tokens(rs: HttpServer, tmp_path) -> None:
    token_file = tmp_path / "tokens.json"
    opener = tmp_path / "browser.py"
    opener.write_text("import sys, urllib.request\nurllib.request.urlopen(sys.argv[1], timeout=20).read()\n")
    env = {**os.environ, "BROWSER": f"{sys.executable} {opener} %s", "MCPKIT_TOKEN_FILE": str(token_file)}
    first = subprocess.run([MCPKIT, "call", url_of(rs), "read_notes", "--oauth"], capture_output=True, text=True,
                           timeout=60, env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "note 1; note 2" and "to authorize, open this URL" in first.stderr
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    env["BROWSER"] = "false"  # no browser this time: the saved token must do
    second = subprocess.run([MCPKIT, "tools", url_of(rs), "--oauth"], capture_output=True, text=True, timeout=60, env=env)
    assert second.returncode == 0 and "read_notes" in second.stdout and "open this URL" not in second.stderr
    gone = subprocess.run([MCPKIT, "logout", url_of(rs)], capture_output=True, text=True, timeout=60, env=env)
    assert gone.returncode == 0 and "forgot 1 saved entry" in gone.stdout
    without = subprocess.run([MCPKIT, "tools", url_of(rs)], capture_output=True, text=True, timeout=60, env=env)
    assert without.returncode == 2 and "try --oauth" in without.stderr and "Traceback" not in without.stderr

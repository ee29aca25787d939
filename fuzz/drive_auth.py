"""The authorization leg of the campaign: forged and mixed-up bearer tokens against one
`mcpkit serve --transport http --auth jwt` on loopback.

A key server publishes a JWKS and signs whatever the campaign makes up (tests/auth_fixtures.py):
tokens for this server and for others (another port, scheme or loopback address, the name the
Host header claims), for users and for clients named like them, with and without a subject, out
of date, unsigned or signed by a key nobody published, plus every named hostile token of
tests/test_auth_server.py. Each goes out with a Host header picked at random, on a stateless
call, into the session and onto the task of the user alice, or to the metadata document.

Every answer is checked against what the token deserves: a token not for this server (as the
socket it came in on names it), or not valid, must get 401; a valid one must be served; a client
named alice, or any other principal, must not reach alice's session or task; the metadata must
name the URL the token is checked against. Bypasses (served when it must not be) and false
refusals are failures, as are crashes, hangs, 5xx answers and tokens found in the log.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from common import PROBE_TIMEOUT, ROOT, Tally, proc_usage

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.auth_fixtures import KeyServer  # noqa: E402
from tests.http_helpers import INIT, HttpServer  # noqa: E402
from tests.scoped_plugin import plugin_env  # noqa: E402
from tests.test_auth_server import hostile_tokens  # noqa: E402

STATELESS = "2026-07-28"
ACCEPT = "application/json, text/event-stream"
PRM = "/.well-known/oauth-protected-resource/mcp"
#: who a token says it is: (claims to drop, claims to set, the owner it must act as; None: refused)
IDENTITIES: list[tuple[tuple[str, ...], dict[str, Any], str | None]] = [
    ((), {}, "sub:alice"),
    ((), {"sub": "bob"}, "sub:bob"),
    (("sub",), {"client_id": "alice"}, "client:alice"),
    (("sub", "client_id"), {"azp": "alice"}, "client:alice"),
    ((), {"sub": "", "client_id": "alice"}, "client:alice"),
    (("sub", "client_id"), {}, None),
    ((), {"sub": 42}, None),
    ((), {"sub": None}, None),
]


class AuthTally(Tally):
    def __init__(self) -> None:
        super().__init__("auth")
        self.bypasses = 0  # served (or reached someone else's) when it must not have been
        self.false_refusals = 0  # a good token refused
        self.leaks = 0  # tokens found in the server's log

    def failed(self) -> bool:
        return super().failed() or bool(self.bypasses or self.false_refusals or self.leaks)

    def count(self, outcome: str) -> None:
        self.statuses[outcome] = self.statuses.get(outcome, 0) + 1


class Campaign:
    def __init__(self, server: HttpServer, keys: KeyServer, tally: AuthTally, rng: random.Random) -> None:
        self.server, self.keys, self.tally, self.rng = server, keys, tally, rng
        port = server.port
        self.own = {f"127.0.0.1:{port}", f"localhost:{port}"}
        self.hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"127.0.0.1:{port + 1}",
                      f"localhost:{port + 7}", f"[::1]:{port}", "127.0.0.1", f"127.0.0.2:{port}"]
        self.hostile = list(hostile_tokens(keys, f"http://127.0.0.1:{port}/mcp").values())
        self.sent_tokens: list[str] = []
        alice = keys.token(keys.claims(f"http://127.0.0.1:{port}/mcp"))
        status, h, _ = self.send("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
                                 {"Authorization": f"Bearer {alice}"}, f"127.0.0.1:{port}")
        self.session = h.get("mcp-session-id", "")
        if status != 200 or not self.session:
            raise RuntimeError(f"alice could not open a session (HTTP {status})")
        call = {"name": "long_job", "arguments": {"seconds": 3600}, "_meta": _meta(tasks=True)}
        reply = json.loads(self.send("POST", "/mcp", {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
                                     {"Authorization": f"Bearer {alice}", **_modern("tools/call", "long_job")},
                                     f"127.0.0.1:{port}")[2])
        self.task = reply["result"]["taskId"]

    def canonical(self, host: str) -> str:
        """The URL a token must be for, when the request says ``host``."""
        asked = host.lower()
        return f"http://{asked if asked in self.own else f'127.0.0.1:{self.server.port}'}/mcp"

    def make_token(self, host: str) -> tuple[str, bool, str | None]:
        """(token, whether it deserves to be served, the owner it acts as)."""
        rng, keys, port = self.rng, self.keys, self.server.port
        if rng.random() < 0.1:
            return rng.choice(self.hostile), False, None
        right = self.canonical(host)
        foreign = rng.choice([f"http://{host}/mcp", f"http://127.0.0.1:{port + 1}/mcp", f"https://127.0.0.1:{port}/mcp",
                              f"http://[::1]:{port}/mcp", f"http://127.0.0.2:{port}/mcp", "http://127.0.0.1/mcp",
                              f"http://localhost:{port + 7}/mcp", "https://other.example/mcp"])
        aud: Any = rng.choice([right, right, foreign, [foreign, right], [foreign], 42, None])
        aud_ok = aud == right or (isinstance(aud, list) and right in aud)
        drop, extra, owner = rng.choice(IDENTITIES)
        claims = {k: v for k, v in keys.claims("x", **extra).items() if k not in drop}
        if aud is None:
            del claims["aud"]
        else:
            claims["aud"] = aud
        when = rng.choice(["now", "now", "now", "expired", "later", "no exp"])
        if when == "expired":
            claims["exp"] = claims["iat"] - 600
        elif when == "later":
            claims["nbf"] = claims["iat"] + 600
        elif when == "no exp":
            del claims["exp"]
        signer = rng.choice(["rsa", "rsa", "rsa", "ec", "other"])
        token = keys.token(claims, key=signer)
        return token, aud_ok and owner is not None and when == "now" and signer != "other", owner

    def send(self, method: str, path: str, body: Any, headers: dict[str, str], host: str) -> tuple[int, dict[str, str], bytes]:
        c = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=PROBE_TIMEOUT)
        try:
            c.request(method, path, body=json.dumps(body).encode() if body is not None else None,
                      headers={"Content-Type": "application/json", "Accept": ACCEPT, "Host": host, **headers})
            resp = c.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            c.close()

    def step(self) -> None:
        rng, tally = self.rng, self.tally
        host = rng.choice(self.hosts)
        action = rng.choice(["whoami", "session", "task", "metadata"])
        if action == "metadata":
            status, _, data = self.send("GET", PRM, None, {}, host)
            tally.sent += 1
            self.judge_status(status)
            if status == 200 and json.loads(data).get("resource") != self.canonical(host):
                self.bypass(f"metadata for Host {host} names {json.loads(data).get('resource')}")
            return
        token, deserved, owner = self.make_token(host)
        if len(self.sent_tokens) < 3000:
            self.sent_tokens.append(token)
        auth = {"Authorization": f"Bearer {token}"}
        if action == "whoami":
            params = {"name": "whoami", "arguments": {}, "_meta": _meta()}
            status, _, data = self.send("POST", "/mcp", _rpc("tools/call", params), {**auth, **_modern("tools/call", "whoami")}, host)
            reached = status == 200
        elif action == "session":
            headers = {**auth, "Mcp-Session-Id": self.session, "MCP-Protocol-Version": "2025-11-25"}
            status, _, data = self.send("POST", "/mcp", _rpc("tools/list", None), headers, host)
            reached = status == 200
        else:
            params = {"taskId": self.task, "_meta": _meta(tasks=True)}
            status, _, data = self.send("POST", "/mcp", _rpc("tasks/get", params), {**auth, **_modern("tasks/get", self.task)}, host)
            reached = status == 200 and b'"result"' in data
        tally.sent += 1
        self.judge_status(status)
        served = status != 401
        may_reach = deserved and (action == "whoami" or owner == "sub:alice")
        tally.count(f"{action} {'served' if served else 'refused'}")
        if reached and not may_reach:
            self.bypass(f"{action} with Host {host}: HTTP {status} {data[:120]!r}")
        elif deserved and not served:
            tally.false_refusals += 1
            tally.note(f"false refusal: {action} with Host {host}: {data[:160]!r}")

    def judge_status(self, status: int) -> None:
        if status >= 500:
            self.tally.server_errors += 1

    def bypass(self, what: str) -> None:
        self.tally.bypasses += 1
        self.tally.note(f"bypass: {what}")


def _rpc(method: str, params: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def _meta(tasks: bool = False) -> dict[str, Any]:
    caps = {"extensions": {"io.modelcontextprotocol/tasks": {}}} if tasks else {}
    return {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": caps}


def _modern(method: str, name: str) -> dict[str, str]:
    return {"MCP-Protocol-Version": STATELESS, "Mcp-Method": method, "Mcp-Name": name}


def run_auth(seconds: float, seed: int, work: Path, workers: int = 2) -> Tally:
    tally = AuthTally()
    work.mkdir(parents=True, exist_ok=True)
    keys = KeyServer()
    env = {**plugin_env(work / "site"), "MCPKIT_AUTH__JWKS_URI": keys.url, "MCPKIT_LOG_LEVEL": "info",
           "MCPKIT_DATA_DIR": str(work / "data")}
    server = HttpServer("--plugin", "scoped", "--auth", "jwt", "--auth-issuer", KeyServer.ISSUER, env=env)
    stop = time.monotonic() + seconds
    try:
        campaigns = [Campaign(server, keys, tally, random.Random(seed * 100 + n)) for n in range(workers)]
        tally.usage_start = proc_usage(server.proc.pid)

        def loop(campaign: Campaign) -> None:
            while time.monotonic() < stop:
                try:
                    campaign.step()
                except socket.timeout:
                    tally.hangs += 1
                    tally.note("hang: a request unanswered")
                except OSError as exc:
                    if server.proc.poll() is not None:
                        tally.crashes += 1
                        tally.note(f"crash: exit {server.proc.returncode}")
                        return
                    tally.note(f"connection failed: {exc}")

        threads = [threading.Thread(target=loop, args=(c,)) for c in campaigns]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if server.proc.poll() is None:
            tally.usage_end = proc_usage(server.proc.pid)
        log = server.stderr.decode(errors="replace")
        for campaign in campaigns:
            for token in campaign.sent_tokens:
                secret = token.split(".")[-1] if token.count(".") == 2 and len(token.split(".")[-1]) > 8 else token
                if len(secret) >= 8 and secret in log:
                    tally.leaks += 1
        tally.tracebacks = log.count("Traceback")
    finally:
        if server.proc.poll() is None:
            server.proc.terminate()
            try:
                server.proc.wait(20)
            except Exception:
                server.proc.kill()
                tally.hangs += 1
        keys.close()
    for name in ("bypasses", "false_refusals", "leaks"):
        tally.statuses[name] = getattr(tally, name)
    return tally

"""What the authorization tests run against: the Authlib authorization server process
(tests/oauth_server.py), a key server whose JWKS the tests control (to sign any token they
like, hostile ones included), and a browser stand-in that follows redirects."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

HERE = Path(__file__).parent


class AuthServer:
    """The real authorization server, in its own process on a loopback port."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(HERE / "oauth_server.py")], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.close()
            raise RuntimeError(f"the authorization server did not start: {line!r}")
        self.issuer = line.split()[-1]

    def settings(self, **values: Any) -> dict[str, Any]:
        return httpx.post(f"{self.issuer}/_test/settings", json=values, timeout=10).json()

    def stats(self) -> dict[str, int]:
        return httpx.get(f"{self.issuer}/_test/stats", timeout=10).json()

    def user_token(self, resource: str, scope: str = "tools:read") -> str:
        """An access token of the user (alice) for ``resource``: the authorization code grant
        with PKCE, through a client registered for it, the approval taken from the redirect."""
        redirect = "http://127.0.0.1:9/callback"  # never visited: the code is read off the redirect
        client = httpx.post(f"{self.issuer}/register", json={"redirect_uris": [redirect], "token_endpoint_auth_method": "none",
                                                             "grant_types": ["authorization_code"], "response_types": ["code"]},
                            timeout=10).json()["client_id"]
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        query = {"response_type": "code", "client_id": client, "redirect_uri": redirect, "scope": scope, "state": "s",
                 "code_challenge": challenge, "code_challenge_method": "S256", "resource": resource}
        location = httpx.get(f"{self.issuer}/authorize", params=query, timeout=10).headers["location"]
        code = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)["code"][0]
        answer = httpx.post(f"{self.issuer}/token", data={"grant_type": "authorization_code", "code": code, "client_id": client,
                                                          "redirect_uri": redirect, "code_verifier": verifier, "resource": resource},
                            timeout=10)
        assert answer.status_code == 200, answer.text
        return answer.json()["access_token"]

    def revoke(self, token: str, client_id: str) -> int:
        return httpx.post(f"{self.issuer}/revoke", data={"token": token, "client_id": client_id}, timeout=10).status_code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _pem_public(key: Any) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


class KeyServer:
    """A JWKS on a loopback port, and the private keys behind it. ``rotate()`` replaces the
    RSA key (new kid) the way an issuer rotates keys."""

    ISSUER = "https://issuer.test"

    def __init__(self) -> None:
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.rsa_kid = "rsa-1"
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.other = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # not published
        self.fetches = 0
        self.up = True
        keys = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                keys.fetches += 1
                body = json.dumps(keys.jwks()).encode()
                self.send_response(200 if keys.up else 503)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/jwks.json"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def jwks(self) -> dict[str, Any]:
        rsa_jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.rsa.public_key()))
        ec_jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.ec.public_key()))
        return {"keys": [{**rsa_jwk, "kid": self.rsa_kid, "use": "sig", "alg": "RS256"},
                         {**ec_jwk, "kid": "ec-1", "use": "sig", "alg": "ES256"}]}

    def rotate(self) -> None:
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.rsa_kid = f"rsa-{int(time.time() * 1000)}"

    def claims(self, audience: str, **extra: Any) -> dict[str, Any]:
        now = int(time.time())
        return {"iss": self.ISSUER, "sub": "alice", "aud": audience, "iat": now, "exp": now + 300,
                "client_id": "test-client", "scope": "tools:read", **extra}

    def token(self, claims: dict[str, Any], *, key: str = "rsa", alg: str | None = None, kid: str | None = None) -> str:
        """A JWT over ``claims``: signed with the published RSA or EC key, or with ``other``
        (a key nobody published)."""
        if key == "ec":
            return jwt.encode(claims, self.ec, algorithm=alg or "ES256", headers={"kid": kid or "ec-1"})
        signer = self.other if key == "other" else self.rsa
        return jwt.encode(claims, signer, algorithm=alg or "RS256", headers={"kid": kid or self.rsa_kid})

    def public_pem(self) -> bytes:
        return _pem_public(self.rsa)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def dead_url() -> str:
    """A loopback URL where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/nothing"


def browser(url: str) -> None:
    """A person approving in a browser: follow the authorization server's redirects back to
    the client's loopback listener."""
    urllib.request.urlopen(url, timeout=20).read()


# -- pytest fixtures (imported by the auth test modules) -------------------------------------

@pytest.fixture(scope="module")
def auth_server():
    server = AuthServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def keys():
    server = KeyServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def scoped_env(tmp_path_factory):
    """The environment under which `mcpkit serve --plugin scoped` finds tests/scoped_plugin.py."""
    from .scoped_plugin import plugin_env

    return plugin_env(tmp_path_factory.mktemp("scoped"))

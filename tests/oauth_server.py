"""A real OAuth 2.1 authorization server for the auth tests, built on Authlib (a test fixture,
not code under test). Run as its own process on loopback:

    python tests/oauth_server.py            # prints "listening on http://127.0.0.1:PORT"

It issues RFC 9068 JWT access tokens signed with an RSA key it makes at start (``aud`` = the
RFC 8707 ``resource`` the client asked for), and offers authorization code with PKCE S256,
refresh tokens (rotated), client credentials, dynamic client registration, introspection
(RFC 7662, for the resource server client ``rs``/``rs-secret``), revocation (RFC 7009), its
metadata (RFC 8414, with ``authorization_response_iss_parameter_supported``) and its JWKS.
The "user" approves every authorization request at once and is always ``alice``. Two clients
are pre-registered for the client credentials grant: ``robot`` and ``alice`` (a client named
like the user, secret ``alice-secret``); introspection answers for their tokens name the
client and no ``sub``, as RFC 7662 allows and several issuers do.

Test knobs: ``POST /_test/settings`` (JSON: ``access_token_lifetime`` seconds, ``max_scopes``:
the most the user grants), ``GET /_test/stats`` (grants served, by type).
"""

from __future__ import annotations

import collections
import json
import secrets
import sys
import time
import urllib.parse
from typing import Any

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import grants
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7591 import ClientRegistrationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc7662 import IntrospectionEndpoint
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator
from flask import Flask, jsonify, request
from joserfc.jwk import KeySet, RSAKey
from werkzeug.serving import make_server

KEY = RSAKey.generate_key(2048, parameters={"kid": "key-1", "use": "sig", "alg": "RS256"}, private=True)
SETTINGS: dict[str, Any] = {"access_token_lifetime": 3600, "max_scopes": None}
STATS: collections.Counter[str] = collections.Counter()
CLIENTS: dict[str, "Client"] = {}
CODES: dict[str, dict[str, Any]] = {}
TOKENS: dict[str, "Token"] = {}  # by access token and by refresh token
ISSUER = ""


class User:
    def get_user_id(self) -> str:
        return "alice"


class Client:
    def __init__(self, client_id: str, secret: str | None, metadata: dict[str, Any]) -> None:
        self.client_id, self.client_secret, self.metadata = client_id, secret, metadata

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        uris = self.metadata.get("redirect_uris") or []
        return uris[0] if uris else None

    def get_allowed_scope(self, scope: str | None) -> str:
        return scope or ""

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in (self.metadata.get("redirect_uris") or [])

    def check_client_secret(self, client_secret: str) -> bool:
        return self.client_secret is not None and secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        if endpoint == "token":
            return method == self.metadata.get("token_endpoint_auth_method", "client_secret_basic")
        return True

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.metadata.get("grant_types", ["authorization_code"])


class Token:
    def __init__(self, data: dict[str, Any], client_id: str, resource: str | None, grant: str | None = None) -> None:
        self.data, self.client_id, self.resource, self.grant = data, client_id, resource, grant
        self.issued_at = time.time()
        self.revoked = False

    def check_client(self, client: Client) -> bool:
        return client.client_id == self.client_id

    def get_scope(self) -> str:
        return self.data.get("scope", "")

    def get_expires_in(self) -> int:
        return int(self.data.get("expires_in", 0))

    def is_expired(self) -> bool:
        return time.time() > self.issued_at + self.get_expires_in()

    def is_revoked(self) -> bool:
        return self.revoked

    def get_user(self) -> User:
        return User()


def query_client(client_id: str) -> Client | None:
    return CLIENTS.get(client_id)


def save_token(token: dict[str, Any], req: Any) -> None:
    resource = request.form.get("resource")
    kept = Token(dict(token), req.client.client_id, resource, request.form.get("grant_type"))
    TOKENS[token["access_token"]] = kept
    if token.get("refresh_token"):
        TOKENS[token["refresh_token"]] = kept


def granted(scope: str | None) -> str:
    """The scopes the user grants: what was asked, capped by the max_scopes knob."""
    asked = (scope or "").split()
    cap = SETTINGS["max_scopes"]
    return " ".join(s for s in asked if cap is None or s in cap)


class TokenGenerator(JWTBearerTokenGenerator):
    @property  # type: ignore[override]
    def issuer(self) -> str:
        return ISSUER  # known once the server is bound

    @issuer.setter
    def issuer(self, value: str) -> None:
        pass

    def get_jwks(self) -> KeySet:
        return KeySet([KEY])

    def get_audiences(self, client: Client, user: Any, scope: str) -> str | list[str]:
        resource = request.form.get("resource")
        if not resource and request.form.get("grant_type") == "authorization_code":
            resource = (CODES.get(request.form.get("code", "")) or {}).get("resource")
        return resource or client.get_client_id()


class AuthCodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]

    def save_authorization_code(self, code: str, req: Any) -> None:
        CODES[code] = {"client_id": req.client.client_id, "redirect_uri": req.payload.redirect_uri,
                       "scope": req.payload.scope, "code_challenge": req.payload.data.get("code_challenge"),
                       "code_challenge_method": req.payload.data.get("code_challenge_method"),
                       "resource": req.payload.data.get("resource")}

    def query_authorization_code(self, code: str, client: Client) -> Any:
        item = CODES.get(code)
        if item and item["client_id"] == client.client_id:
            return _Code(code, item)
        return None

    def delete_authorization_code(self, authorization_code: Any) -> None:
        CODES.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code: Any) -> User:
        return User()


class _Code:
    def __init__(self, code: str, item: dict[str, Any]) -> None:
        self.code, self.item = code, item

    def get_redirect_uri(self) -> str:
        return self.item["redirect_uri"]

    def get_scope(self) -> str:
        return self.item["scope"] or ""

    def get_nonce(self) -> None:
        return None

    def get_auth_time(self) -> None:
        return None

    @property
    def code_challenge(self) -> str | None:
        return self.item["code_challenge"]

    @property
    def code_challenge_method(self) -> str | None:
        return self.item["code_challenge_method"]


class RefreshGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token: str) -> Token | None:
        token = TOKENS.get(refresh_token)
        if token is None or token.revoked or token.data.get("refresh_token") != refresh_token:
            return None
        return token

    def authenticate_user(self, refresh_token: Token) -> User:
        return User()

    def revoke_old_credential(self, refresh_token: Token) -> None:
        refresh_token.revoked = True


class ClientCredentials(grants.ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]


class Registration(ClientRegistrationEndpoint):
    def authenticate_token(self, req: Any) -> bool:
        return True  # open registration

    def resolve_public_key(self, req: Any) -> None:
        return None

    def save_client(self, client_info: dict[str, Any], client_metadata: dict[str, Any], req: Any) -> Client:
        client = Client(client_info["client_id"], client_info.get("client_secret"), client_metadata)
        CLIENTS[client.client_id] = client
        return client

    def get_server_metadata(self) -> dict[str, Any]:
        return metadata()


class Introspection(IntrospectionEndpoint):
    CLIENT_AUTH_METHODS = ["client_secret_basic"]

    def query_token(self, token_string: str, token_type_hint: str | None) -> Token | None:
        return TOKENS.get(token_string)

    def introspect_token(self, token: Token) -> dict[str, Any]:
        STATS["introspection"] += 1
        answer = {"active": True, "client_id": token.client_id, "token_type": "Bearer", "scope": token.get_scope(),
                  "sub": "alice", "aud": token.resource, "iss": ISSUER, "exp": int(token.issued_at) + token.get_expires_in(),
                  "iat": int(token.issued_at)}
        if token.grant == "client_credentials":  # no user: the client alone
            del answer["sub"]
        return answer

    def check_permission(self, token: Token, client: Client, req: Any) -> bool:
        return client.client_id == "rs"


class Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]

    def query_token(self, token_string: str, token_type_hint: str | None) -> Token | None:
        return TOKENS.get(token_string)

    def revoke_token(self, token: Token, req: Any) -> None:
        token.revoked = True


def metadata() -> dict[str, Any]:
    return {
        "issuer": ISSUER, "authorization_endpoint": f"{ISSUER}/authorize", "token_endpoint": f"{ISSUER}/token",
        "registration_endpoint": f"{ISSUER}/register", "introspection_endpoint": f"{ISSUER}/introspect",
        "revocation_endpoint": f"{ISSUER}/revoke", "jwks_uri": f"{ISSUER}/jwks.json",
        "response_types_supported": ["code"], "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "code_challenge_methods_supported": ["S256"], "scopes_supported": ["tools:read", "tools:write", "admin"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
        "authorization_response_iss_parameter_supported": True,
    }


def build_app() -> Flask:
    app = Flask(__name__)
    server = AuthorizationServer(app, query_client=query_client, save_token=save_token)
    server.register_token_generator("default", TokenGenerator(ISSUER, refresh_token_generator=lambda **kw: secrets.token_urlsafe(32),
                                                              expires_generator=lambda *a, **kw: SETTINGS["access_token_lifetime"]))
    server.register_grant(AuthCodeGrant, [CodeChallenge(required=True)])
    server.register_grant(RefreshGrant)
    server.register_grant(ClientCredentials)
    server.register_endpoint(Registration)
    server.register_endpoint(Introspection)
    server.register_endpoint(Revocation)
    CLIENTS["rs"] = Client("rs", "rs-secret", {"token_endpoint_auth_method": "client_secret_basic"})
    CLIENTS["robot"] = Client("robot", "robot-secret", {"token_endpoint_auth_method": "client_secret_basic",
                                                        "grant_types": ["client_credentials"]})
    CLIENTS["alice"] = Client("alice", "alice-secret", {"token_endpoint_auth_method": "client_secret_basic",
                                                        "grant_types": ["client_credentials"]})

    @app.get("/.well-known/oauth-authorization-server")
    def as_metadata() -> Any:
        return jsonify(metadata())

    @app.get("/jwks.json")
    def jwks() -> Any:
        return jsonify({"keys": [KEY.as_dict(private=False)]})

    @app.get("/authorize")
    def authorize() -> Any:
        args = request.args.to_dict()
        if "scope" in args:
            args["scope"] = granted(args["scope"])
        request.args = type(request.args)(args)  # the user grants what the knob allows
        response = server.create_authorization_response(grant_user=User())
        location = response.headers.get("Location")
        if location:  # RFC 9207: say who answers
            sep = "&" if "?" in location else "?"
            response.headers["Location"] = f"{location}{sep}{urllib.parse.urlencode({'iss': ISSUER})}"
        return response

    @app.post("/token")
    def token() -> Any:
        STATS[request.form.get("grant_type", "?")] += 1
        return server.create_token_response()

    @app.post("/register")
    def register() -> Any:
        return server.create_endpoint_response("client_registration")

    @app.post("/introspect")
    def introspect() -> Any:
        return server.create_endpoint_response("introspection")

    @app.post("/revoke")
    def revoke() -> Any:
        return server.create_endpoint_response("revocation")

    @app.post("/_test/settings")
    def settings() -> Any:
        SETTINGS.update(request.get_json(force=True))
        return jsonify(SETTINGS)

    @app.get("/_test/stats")
    def stats() -> Any:
        return jsonify(dict(STATS))

    return app


def main() -> None:
    global ISSUER
    httpd = make_server("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0, build_app(), threaded=True)
    ISSUER = f"http://127.0.0.1:{httpd.server_port}"
    print(f"listening on {ISSUER}", flush=True)
    print(json.dumps({"issuer": ISSUER}), flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()

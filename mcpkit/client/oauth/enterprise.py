"""Enterprise-managed authorization (SEP-990): the user's identity provider vouches for them.

The client holds an ID token from the enterprise IdP, exchanges it there (RFC 8693 token
exchange) for an Identity Assertion JWT Authorization Grant (ID-JAG) naming the MCP server's
authorization server and resource, and presents that as a JWT bearer assertion (RFC 7523):

    OAuth(grant="jwt_bearer", client_id=..., client_secret=...,
          assertion=IdJagExchange(idp_token_endpoint, id_token, idp_client_id=...))
"""

from __future__ import annotations

import httpx

from ..errors import AuthorizationFailed
from .grants import post_form

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"


class IdJagExchange:
    """An ``assertion`` for ``OAuth(grant="jwt_bearer")``: asks the IdP for an ID-JAG for
    the authorization server and resource at hand, each time one is needed."""

    def __init__(self, token_endpoint: str, id_token: str, *, idp_client_id: str | None = None,
                 idp_client_secret: str | None = None, timeout: float = 30.0) -> None:
        self.token_endpoint = token_endpoint
        self.id_token = id_token
        self.idp_client_id = idp_client_id
        self.idp_client_secret = idp_client_secret
        self.timeout = timeout

    async def __call__(self, issuer: str, resource: str, scopes: list[str]) -> str:
        data = {"grant_type": TOKEN_EXCHANGE, "requested_token_type": ID_JAG, "subject_token": self.id_token,
                "subject_token_type": ID_TOKEN, "audience": issuer, "resource": resource}
        if scopes:
            data["scope"] = " ".join(scopes)
        auth = None
        if self.idp_client_id and self.idp_client_secret:
            auth = httpx.BasicAuth(self.idp_client_id, self.idp_client_secret)
        elif self.idp_client_id:
            data["client_id"] = self.idp_client_id
        async with httpx.AsyncClient(timeout=self.timeout, auth=auth) as http:
            status, doc = await post_form(http, self.token_endpoint, data, what="the identity provider's token endpoint")
        token = doc.get("access_token") if isinstance(doc, dict) else None
        if status != 200 or not isinstance(token, str) or not token:
            error = doc.get("error") if isinstance(doc, dict) else None
            raise AuthorizationFailed(f"the identity provider refused the token exchange (HTTP {status}"
                                      + (f": {error})" if isinstance(error, str) else ")"))
        if isinstance(doc, dict) and doc.get("issued_token_type") not in (None, ID_JAG):
            raise AuthorizationFailed(f"the identity provider issued a {doc.get('issued_token_type')}, not an ID-JAG")
        return token

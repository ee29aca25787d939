"""The issuer's metadata (RFC 8414, OpenID Connect Discovery), for its ``jwks_uri``."""

from __future__ import annotations

from typing import Any

import httpx

from ....protocol.oauth import issuer_metadata_urls
from ....server.auth import VerifierUnavailable
from .verifiers import fetch_json


async def discover_issuer_metadata(client: httpx.AsyncClient, issuer: str) -> dict[str, Any]:
    """The first metadata document found for ``issuer`` whose ``issuer`` matches exactly."""
    reasons: list[str] = []
    for url in issuer_metadata_urls(issuer):
        try:
            status, doc = await fetch_json(client, "GET", url, "the issuer metadata")
        except VerifierUnavailable as exc:
            reasons.append(str(exc))
            continue
        if status != 200 or not isinstance(doc, dict):
            reasons.append(f"{url}: HTTP {status}")
            continue
        if doc.get("issuer") != issuer:
            reasons.append(f"{url} names issuer {doc.get('issuer')!r}, not {issuer!r}")
            continue
        return doc
    raise VerifierUnavailable(f"no metadata found for issuer {issuer}: {'; '.join(reasons)}")

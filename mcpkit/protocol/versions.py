"""The MCP revisions mcpkit speaks and what each one allows."""

from __future__ import annotations

from dataclasses import dataclass

#: Revisions that open with the ``initialize`` handshake, oldest first.
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
#: Revisions where every request carries its version in ``_meta`` (no handshake).
STATELESS_VERSIONS: tuple[str, ...] = ("2026-07-28",)
ALL_VERSIONS: tuple[str, ...] = HANDSHAKE_VERSIONS + STATELESS_VERSIONS
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[-1]
LATEST = ALL_VERSIONS[-1]


@dataclass(frozen=True, slots=True)
class Features:
    """What one revision's schema carries, so results are shaped in one place."""

    version: str
    stateless: bool
    batches: bool  # JSON-RPC batches (2025-03-26 only)
    tool_annotations: bool  # Tool.annotations, audio content, completions (2025-03-26+)
    audio: bool
    progress_message: bool
    titles: bool  # title fields, outputSchema/structuredContent, resource_link (2025-06-18+)
    structured_output: bool
    resource_links: bool
    elicitation: bool
    input_errors_as_results: bool  # bad tool arguments -> isError result (2025-11-25+)
    result_type: bool  # resultType / ttlMs / cacheScope / serverInfo in _meta (2026-07-28)


def features(version: str) -> Features:
    """Return the feature set of ``version`` (which must be one of ALL_VERSIONS)."""
    return _FEATURES[version]


def _build(version: str) -> Features:
    at_least = ALL_VERSIONS.index(version)

    def since(v: str) -> bool:
        return at_least >= ALL_VERSIONS.index(v)

    return Features(
        version=version,
        stateless=version in STATELESS_VERSIONS,
        batches=version == "2025-03-26",
        tool_annotations=since("2025-03-26"),
        audio=since("2025-03-26"),
        progress_message=since("2025-03-26"),
        titles=since("2025-06-18"),
        structured_output=since("2025-06-18"),
        resource_links=since("2025-06-18"),
        elicitation=since("2025-06-18"),
        input_errors_as_results=since("2025-11-25"),
        result_type=since("2026-07-28"),
    )


_FEATURES = {v: _build(v) for v in ALL_VERSIONS}


def negotiate(requested: str | None) -> str:
    """Pick the handshake revision to answer ``initialize`` with.

    The client's version when we support it in the handshake era, else our newest handshake one.
    """
    if requested in HANDSHAKE_VERSIONS:
        return requested  # type: ignore[return-value]
    return LATEST_HANDSHAKE

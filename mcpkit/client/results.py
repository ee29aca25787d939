"""Plain views over what the server returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class CallResult:
    """A tools/call result. ``is_error`` results are results, not exceptions."""

    content: list[dict[str, Any]]
    structured: Any = None
    is_error: bool = False
    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> "CallResult":
        content = raw.get("content")
        return cls(content=content if isinstance(content, list) else [],
                   structured=raw.get("structuredContent"), is_error=bool(raw.get("isError")), raw=raw)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines."""
        return "\n".join(b.get("text", "") for b in self.content if isinstance(b, dict) and b.get("type") == "text")


@dataclass(slots=True)
class ServerDescription:
    era: str  # "stateless" or "handshake"
    protocol_version: str
    transport: str  # "stdio", "http" or "sse"
    server_info: dict[str, Any]
    capabilities: dict[str, Any]
    instructions: str | None = None
    supported_versions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {"era": self.era, "protocolVersion": self.protocol_version, "transport": self.transport,
               "serverInfo": self.server_info, "capabilities": self.capabilities}
        if self.supported_versions:
            out["supportedVersions"] = self.supported_versions
        if self.instructions:
            out["instructions"] = self.instructions
        return out

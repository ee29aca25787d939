"""Client settings, with defaults a demanding user would pick."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .._version import __version__


@dataclass
class ClientSettings:
    #: "auto" probes the stateless era and falls back to the handshake; the others pin one era.
    mode: Literal["auto", "stateless", "handshake"] = "auto"
    #: Pin an exact protocol version (implies its era).
    protocol_version: str | None = None
    client_name: str = "mcpkit"
    client_version: str = __version__
    #: Seconds for the handshake or discovery to finish.
    initialize_timeout: float = 30.0
    #: Default seconds per request; None waits for ever. Each call may override it.
    request_timeout: float | None = 60.0
    #: Seconds a stdio server gets to answer the server/discover probe before we assume a
    #: handshake-era server.
    probe_timeout: float = 5.0
    #: Connection attempts after the first, and the first back-off delay (doubling each time).
    #: Only sends that never reached the server, and the handshake, are retried.
    retries: int = 2
    backoff: float = 0.25
    #: Use UUID v4 request ids instead of counting integers.
    uuid_ids: bool = False
    #: Seconds the tool list is trusted when the server gives no ttlMs.
    tools_ttl: float = 300.0
    #: Log level asked of the server (logging/setLevel, or per request in the stateless era).
    log_level: str | None = None
    #: Rounds of input requests (MRTR) one call may go through.
    max_input_rounds: int = 8
    #: Declare the tasks extension (stateless era): a server may then answer a long tool call
    #: with a task handle, which call_tool waits out (polling) and start_tool hands back.
    tasks: bool = False
    #: Shortest pause between tasks/get polls (the server's pollIntervalMs is honoured above it).
    min_poll_interval: float = 0.05
    #: Extra HTTP headers, and a bearer token.
    headers: dict[str, str] = field(default_factory=dict)
    auth_token: str | None = None
    #: OAuth 2.1 for HTTP servers that ask for it: a :class:`mcpkit.client.oauth.OAuth`
    oauth: Any = None
    #: Remember each server's era for the life of this process.
    remember_era: bool = True
    #: Fill the tool list cache right after connecting.
    prefetch_tools: bool = True
    #: Where a stdio server's stderr goes: None passes it through, or a file object (or
    #: ``subprocess.DEVNULL``) to keep it off the terminal.
    server_stderr: Any = None
    #: A ready transport to use instead of one made from the target (``mcpkit.testing``'s
    #: in-memory link); it is probed like a stdio server.
    transport: Any = None

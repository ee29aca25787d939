"""How the client moves frames: a subprocess's stdio, Streamable HTTP, or legacy HTTP+SSE.

Every transport takes encoded frames through :meth:`Transport.send` and hands what arrives to the
``deliver`` callback given to :meth:`Transport.start`: decoded messages, or a :class:`Failure` when a
request can no longer be answered (HTTP error, stream closed, process gone).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Union

import trio

from ...protocol import jsonrpc
from ...protocol.jsonrpc import Message, RequestId
from ..errors import BadResponse, McpError


@dataclass(slots=True)
class Failure:
    """``request_id`` can not be answered because of ``error``; ``None`` means the whole link."""

    request_id: RequestId | None
    error: McpError


Incoming = Union[Message, Failure]
Deliver = Callable[[Incoming], None]


class Transport(Protocol):
    #: "stdio", "http" (Streamable HTTP) or "sse" (legacy HTTP+SSE)
    kind: str
    #: The protocol version to announce in transport headers, once known.
    protocol_version: str | None

    async def start(self, nursery: trio.Nursery, deliver: Deliver) -> None: ...

    async def send(self, frame: bytes, *, request_id: RequestId | None = None,
                   headers: dict[str, str] | None = None, stateless: bool = False) -> None:
        """Send one frame; for a request, its answer arrives through ``deliver`` later.

        ``stateless`` marks a 2026-07-28 request on HTTP: its response stream is its own and
        closing it cancels the request.
        """
        ...

    def abort(self, request_id: RequestId) -> bool:
        """Close the stream carrying ``request_id``'s answer; False when the transport cannot."""
        ...

    async def aclose(self) -> None: ...

    def describe(self) -> dict[str, Any]: ...


def deliver_frame(data: bytes, deliver: Deliver, request_id: RequestId | None = None) -> None:
    """Decode one frame (a stdio line, an HTTP body, an SSE data field) and deliver its messages.

    An error response without an id is taken as the answer to ``request_id`` when one is given.
    """
    try:
        decoded = jsonrpc.decode(data)
    except jsonrpc.ProtocolError:
        deliver(Failure(request_id, BadResponse(f"the server sent something that is not JSON: {_clip(data)}")))
        return
    for msg in decoded if isinstance(decoded, list) else [decoded]:
        if isinstance(msg, jsonrpc.Invalid):
            deliver(Failure(request_id, BadResponse(f"the server sent something that is not JSON-RPC: {_clip(data)}")))
            continue
        if msg.is_response and msg.id is None and request_id is not None:
            msg.id = request_id
        deliver(msg)


def _clip(data: bytes) -> str:
    text = data[:80].decode("utf-8", "replace").strip()
    return repr(text + ("..." if len(data) > 80 else ""))

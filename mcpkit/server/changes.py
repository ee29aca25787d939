"""The change hub: list_changed, resource updates and task status, fanned out to whoever listens.

Two kinds of receivers, one route each:

- **listeners** (``with hub.listen() as events``) act for one connection: a stdio client, a
  legacy SSE stream, a ``subscriptions/listen`` request. They get every change, this process's
  and (with shared state) every other process's.
- **relays** (``with hub.relaying(fn)``) act for the whole deployment: telling the other
  processes (the bus), writing notices into every HTTP session's stream. They get only the
  changes raised here (another process's changes were relayed by that process), and
  :meth:`ChangeHub.announce` waits for them, so a change a request raises is out before the
  request is answered.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Awaitable, Callable, Iterator

import trio

from ..protocol.jsonrpc import ProtocolError

log = logging.getLogger("mcpkit.server")
Change = tuple[str, Any]
Relay = Callable[[str, Any], Awaitable[None]]
#: changes a listener may fall behind by before it loses some (it never blocks the server)
LISTENER_BACKLOG = 64
#: changes raised without waiting (task status) that may queue for the relays
RELAY_BACKLOG = 256


class ChangeHub:
    def __init__(self) -> None:
        self._listeners: set[trio.MemorySendChannel[Change]] = set()
        self._relays: list[Relay] = []
        self._queued_send, self._queued = trio.open_memory_channel[Change](RELAY_BACKLOG)
        self.closed = False
        self.dropped = 0

    # -- raising a change --------------------------------------------------------------------
    async def announce(self, event: str, arg: Any) -> None:
        """A change raised by a request: every listener gets it, and it is relayed (the other
        processes told, the sessions' streams written) before this returns. A relay that fails
        (shared state away) loses this hint; the link logs the outage."""
        self._deliver(event, arg)
        await self._relay(event, arg)

    def publish(self, event: str, arg: Any) -> None:
        """A change raised where nothing can wait (task status): listeners get it now, the
        relays soon (see :meth:`pump`)."""
        self._deliver(event, arg)
        if self._relays:
            try:
                self._queued_send.send_nowait((event, arg))
            except trio.WouldBlock:
                self.dropped += 1  # relays that fell far behind lose hints, never block the server

    def arrived(self, event: str, arg: Any) -> None:
        """A change another process raised (through the bus): for the listeners here only."""
        self._deliver(event, arg)

    # -- receiving ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def listen(self) -> Iterator[trio.MemoryReceiveChannel[Change]]:
        """Changes for one connection, as long as the block runs (ends at once when closed)."""
        send, receive = trio.open_memory_channel[Change](LISTENER_BACKLOG)
        if self.closed:
            send.close()
        else:
            self._listeners.add(send)
        try:
            yield receive
        finally:
            self._listeners.discard(send)
            send.close()

    @contextlib.contextmanager
    def relaying(self, relay: Relay) -> Iterator[None]:
        """Relay this process's changes with ``relay`` as long as the block runs."""
        self._relays.append(relay)
        try:
            yield
        finally:
            self._relays.remove(relay)

    async def pump(self) -> None:
        """Relay the changes :meth:`publish` queued (run it where relays are registered)."""
        async for event, arg in self._queued:
            await self._relay(event, arg)

    def close(self) -> None:
        """End every listener, including any that starts listening later (shutdown)."""
        self.closed = True
        for chan in list(self._listeners):
            chan.close()
        self._listeners.clear()

    # -- inside --------------------------------------------------------------------------------
    def _deliver(self, event: str, arg: Any) -> None:
        for chan in list(self._listeners):
            try:
                chan.send_nowait((event, arg))
            except trio.WouldBlock:
                self.dropped += 1  # a listener that stopped reading loses change hints
            except trio.BrokenResourceError:
                self._listeners.discard(chan)

    async def _relay(self, event: str, arg: Any) -> None:
        for relay in list(self._relays):
            try:
                await relay(event, arg)
            except ProtocolError:
                pass


__all__ = ["ChangeHub", "Change", "Relay"]

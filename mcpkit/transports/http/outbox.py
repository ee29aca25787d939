"""A queue of messages waiting to be written to one client stream, bounded in bytes."""

from __future__ import annotations

import collections
from typing import Generic, TypeVar

import trio

T = TypeVar("T")


class Outbox(Generic[T]):
    """Messages for one reader, at most ``max_bytes`` of them waiting (one oversized message
    is always let in when the box is empty).

    A put that would go over the bound fails and closes the box: a client that does not read
    its stream loses the stream, never the server's memory. The reader gets what was queued
    before, then ``trio.EndOfChannel``.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.closed = False
        self.overflowed = False
        self._items: collections.deque[tuple[T, int]] = collections.deque()
        self._bytes = 0
        self._ready = trio.Event()

    def put(self, item: T, size: int) -> bool:
        """Queue ``item`` (``size`` bytes); False when the box is closed or would overflow."""
        if self.closed:
            return False
        if self._items and self._bytes + size > self.max_bytes:
            self.overflowed = True
            self.close()
            return False
        self._items.append((item, size))
        self._bytes += size
        self._ready.set()
        return True

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def get(self) -> T:
        """The next item; ``trio.EndOfChannel`` once the box is closed and empty."""
        while not self._items:
            if self.closed:
                raise trio.EndOfChannel
            await self._ready.wait()
            if not self._items and not self.closed:
                self._ready = trio.Event()
        item, size = self._items.popleft()
        self._bytes -= size
        return item

    def __len__(self) -> int:
        return len(self._items)

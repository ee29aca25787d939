"""Requests answered in the order they came, under saturation: a FIFO gate in front of the
application (``active_requests`` at once, per process).

Without it every connection's request starts as soon as its bytes are read, so under
saturation a request that awaits I/O (a tool calling an API and Redis) competes at each of its
steps with every request that arrived since; cheap requests are answered within one scheduler
pass while it waits tens of times its unloaded time (issue 27). With the gate, requests past
the cap wait their turn in arrival order, and the ones admitted finish their I/O steps with few
competitors: every request waits about as long, however many steps it has.

A request that has been answered for ``hold`` seconds stops counting (a long stream, a slow
upstream): it runs on, and its place goes to the next in line, so long requests never lock
the others out. Taking a free place costs no checkpoint.
"""

from __future__ import annotations

import collections
import math

import trio


class _Waiter:
    __slots__ = ("event", "handed")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.handed = False  # a place was given to it


class Gate:
    def __init__(self, size: int, hold: float) -> None:
        self.size = size
        self.hold = hold
        #: who holds a place, since when (insertion order: oldest first)
        self.holders: dict[object, float] = {}
        self._queue: collections.deque[_Waiter] = collections.deque()
        self._handed = 0  # places given to waiters that have not taken them yet

    def _room(self, now: float) -> int:
        """Free places, after retiring holders older than ``hold``."""
        holders = self.holders
        while len(holders) + self._handed >= self.size and holders:
            token, since = next(iter(holders.items()))
            if now - since < self.hold:
                break
            del holders[token]  # it runs on without a place
        return self.size - len(holders) - self._handed

    async def enter(self, token: object) -> None:
        """Take a place for ``token`` (at once when one is free and nobody waits)."""
        queue = self._queue
        if not queue and self._room(trio.current_time()) > 0:
            self.holders[token] = trio.current_time()
            return
        me = _Waiter()
        queue.append(me)
        try:
            while not me.handed:
                deadline = math.inf
                if queue[0] is me and self.holders:  # the first in line wakes when the oldest place can be retired
                    deadline = next(iter(self.holders.values())) + self.hold
                if deadline == math.inf:
                    await me.event.wait()
                else:
                    with trio.move_on_at(deadline):
                        await me.event.wait()
                if me.handed or (queue[0] is me and self._room(trio.current_time()) > 0):
                    break
                me.event = trio.Event()  # first in line now, or retired nobody yet: wait again
        except BaseException:
            self._leave_queue(me)
            raise
        self.holders[token] = trio.current_time()  # before the others are woken: this place is taken
        self._leave_queue(me)

    def _leave_queue(self, me: _Waiter) -> None:
        first = self._queue[0] is me
        self._queue.remove(me)
        if me.handed:
            self._handed -= 1
        self._wake()
        if first and self._queue and not self._queue[0].handed:
            self._queue[0].event.set()  # the new first in line sets its own deadline

    def leave(self, token: object) -> None:
        """``token``'s request is answered (or streams): its place goes to the first in line."""
        if self.holders.pop(token, None) is not None and self._queue:
            self._wake()

    def _wake(self) -> None:
        if not self._queue:
            return
        room = self._room(trio.current_time())
        for waiter in self._queue:
            if room <= 0:
                break
            if not waiter.handed:
                waiter.handed = True
                self._handed += 1
                waiter.event.set()
                room -= 1

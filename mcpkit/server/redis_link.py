"""The link to Redis when several processes share state (``state = "redis://..."``).

One coredis client (it runs on trio through anyio: no threads, no asyncio bridge), every
command under a deadline, every failure turned into :class:`StateUnavailable` — a JSON-RPC
``-32000`` the HTTP layer answers with 503 and ``Retry-After`` — with one log line naming the
URL per outage. A bus (one pub/sub channel) carries what processes tell each other; the
subscriber reconnects by itself, and what it misses while Redis is away is made good by
polling where it matters (event streams, task signals).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import time
import urllib.parse
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

import msgspec
import trio

from ..protocol import jsonrpc
from ..protocol.jsonrpc import ProtocolError

log = logging.getLogger("mcpkit.state")
T = TypeVar("T")
Handler = Callable[[dict[str, Any]], None]


class StateUnavailable(ProtocolError):
    """Shared state could not be reached: the request is refused, to be retried shortly."""

    def __init__(self, url: str) -> None:
        super().__init__(jsonrpc.SERVER_BUSY, f"Service Unavailable: shared state ({url}) cannot be reached; retry shortly",
                         {"retryAfter": 1})


_tag: tuple[int, str] = (0, "")


def process_tag() -> str:
    """A short random name for this process, new in each forked child: ids it hands out and
    messages it publishes carry it, so no other process takes them for its own."""
    global _tag
    pid = os.getpid()
    if _tag[0] != pid:
        _tag = (pid, secrets.token_hex(4))
    return _tag[1]


def display_url(url: str) -> str:
    """The URL without its password, for logs and /healthz."""
    parts = urllib.parse.urlsplit(url)
    if parts.password:
        host = parts.hostname or ""
        user = f"{parts.username}:***@" if parts.username else ":***@"
        netloc = f"{user}{host}" + (f":{parts.port}" if parts.port else "")
        parts = parts._replace(netloc=netloc)
    return urllib.parse.urlunsplit(parts)


class RedisLink:
    def __init__(self, url: str, prefix: str = "mcpkit", timeout: float = 2.0) -> None:
        import coredis  # only when a Redis URL is configured

        from .redis_client import freeze_coredis_config

        freeze_coredis_config()  # coredis would read os.environ on every command
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"state must be 'memory' or a redis:// / rediss:// URL, got {url!r}")
        self.url = url
        self.display = display_url(url)
        self.prefix = prefix
        self.timeout = timeout
        self.client = coredis.Redis.from_url(url, connect_timeout=timeout, stream_timeout=timeout)
        self.handlers: dict[str, list[Handler]] = {}
        #: run after the bus is back from an outage, to make good what it missed
        self.resubscribed: list[Callable[[], Awaitable[None]]] = []
        self._channel = f"{prefix}:bus"
        self._down_since: float | None = None
        self.ok = False

    @property
    def tag(self) -> str:
        """This process, on the bus (a forked worker gets its own)."""
        return process_tag()

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator["RedisLink"]:
        async with self.client:
            try:
                await self.call(lambda r: r.ping())
            except StateUnavailable:
                pass  # logged; the server starts all the same and recovers when Redis is back
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._listen)
                try:
                    yield self
                finally:
                    nursery.cancel_scope.cancel()

    async def call(self, command: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``command(client)`` under the deadline; StateUnavailable if Redis is not there."""
        try:
            with trio.fail_after(self.timeout):
                result = await command(self.client)
        except (trio.TooSlowError, OSError, BaseExceptionGroup) as exc:
            self._failed(exc)
            raise StateUnavailable(self.display) from None
        except Exception as exc:
            if type(exc).__module__.startswith("coredis") and "Response" not in type(exc).__name__:
                self._failed(exc)
                raise StateUnavailable(self.display) from None
            raise
        self._recovered()
        return result

    def _failed(self, exc: BaseException) -> None:
        self.ok = False
        if self._down_since is None:
            self._down_since = time.monotonic()
            log.error("shared state %s cannot be reached (%s); requests that need it get 503 until it is back",
                      self.display, type(exc).__name__)

    def _recovered(self) -> None:
        self.ok = True
        if self._down_since is not None:
            log.warning("shared state %s is reachable again after %.1f s", self.display, time.monotonic() - self._down_since)
            self._down_since = None

    # -- the bus ------------------------------------------------------------------------------------
    def on(self, kind: str, handler: Handler) -> None:
        self.handlers.setdefault(kind, []).append(handler)

    async def publish(self, kind: str, **payload: Any) -> None:
        message = msgspec.json.encode({"k": kind, "o": self.tag, **payload})
        await self.call(lambda r: r.publish(self._channel, message))

    async def _listen(self) -> None:
        """Deliver bus messages from other processes to the handlers, reconnecting for ever."""
        delay = 0.2
        first = True
        while True:
            try:
                async with self.client.pubsub(channels=[self._channel], ignore_subscribe_messages=True) as sub:
                    delay = 0.2
                    if not first:
                        for catch_up in self.resubscribed:
                            await catch_up()
                    first = False
                    async for message in sub:
                        if message and message.get("type") == "message":
                            self._dispatch(message["data"])
            except (OSError, BaseExceptionGroup, Exception) as exc:  # noqa: B014 - coredis raises plain Exceptions
                if isinstance(exc, trio.Cancelled):
                    raise
                self._failed(exc)
            await trio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _dispatch(self, data: bytes) -> None:
        try:
            message = msgspec.json.decode(data)
        except msgspec.DecodeError:
            return
        if not isinstance(message, dict) or message.get("o") == self.tag:
            return  # our own
        for handler in self.handlers.get(message.get("k", ""), ()):
            try:
                handler(message)
            except Exception:
                log.exception("bus handler for %s failed", message.get("k"))

    # -- what every part needs ------------------------------------------------------------------------
    async def shared_secret(self) -> bytes:
        """The requestState sealing secret every process of this deployment shares."""
        key = self.key("secret")
        candidate = secrets.token_hex(32)
        await self.call(lambda r: r.set(key, candidate, condition=_nx()))
        value = await self.call(lambda r: r.get(key))
        return bytes(value) if value else candidate.encode()

    async def health(self) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            await self.call(lambda r: r.ping())
        except StateUnavailable:
            return {"backend": "redis", "url": self.display, "ok": False}
        return {"backend": "redis", "url": self.display, "ok": True,
                "latency_ms": round((time.perf_counter() - started) * 1000, 2)}


def _nx() -> Any:
    from coredis import PureToken

    return PureToken.NX

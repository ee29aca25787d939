"""The link to Redis when several processes share state (``state = "redis://..."``).

One coredis client (it runs on trio through anyio: no threads, no asyncio bridge), every
command under a deadline, every failure turned into :class:`StateUnavailable` — a JSON-RPC
``-32000`` the HTTP layer answers with 503 and ``Retry-After`` — with one log line naming the
URL per outage. A failure is Redis out of reach (refused connection, timeout) or Redis
refusing the command (an error reply: OOM under ``maxmemory``, READONLY on a replica, MISCONF
when it cannot save, ...); clients get the same 503 for both and never Redis's own text.

A request's commands share one deadline (:meth:`RedisLink.request_budget`): a request waits
for Redis at most ``timeout`` in all, however many commands it runs. A bus (a pub/sub channel
per process, read by the other processes) carries what they tell each other; the subscriber
reconnects by itself, and what it misses while Redis is away is made good by polling where
it matters (event streams, task signals, sessions that Redis lost).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import os
import re
import secrets
import time
import urllib.parse
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, TypeVar

import msgspec
import trio

from .._extras import require
from ..protocol import jsonrpc
from ..protocol.jsonrpc import ProtocolError
from .resp import RespError, RespPool

log = logging.getLogger("mcpkit.state")
T = TypeVar("T")
Handler = Callable[[dict[str, Any]], None]


UNREACHABLE = "cannot be reached"
REFUSING = "is refusing commands"
#: after this long without an error reply (and with commands succeeding) Redis counts as
#: accepting commands again: reads may succeed while writes are refused, so one success says little
REFUSAL_QUIET_S = 5.0


class Script:
    """A Lua script, sent by its SHA-1 (EVALSHA) and by its text only when Redis lacks it."""

    __slots__ = ("text", "sha")

    def __init__(self, text: str) -> None:
        self.text = text.encode()
        self.sha = hashlib.sha1(self.text).hexdigest()


class StateUnavailable(ProtocolError):
    """Shared state failed the request (out of reach, or refusing commands): the request is
    refused, to be retried shortly. The message names the URL (without password), never what
    Redis said."""

    def __init__(self, url: str, problem: str = UNREACHABLE) -> None:
        super().__init__(jsonrpc.SERVER_BUSY, f"Service Unavailable: shared state ({url}) {problem}; retry shortly",
                         {"retryAfter": 1})


class _Budget:
    """How long one request may still wait for Redis (a trio clock deadline)."""

    __slots__ = ("deadline",)

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline


#: the budget of the request the current task works for (tasks it starts share it)
_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("mcpkit_state_budget", default=None)


class _OnlyWhenDebugging(logging.Filter):
    """coredis logs a failed connection attempt with a whole traceback, every time; the link
    says once per outage what failed, so coredis's own records show only at debug level."""

    def filter(self, record: logging.LogRecord) -> bool:
        return log.isEnabledFor(logging.DEBUG)


_CLIENT_LOG_FILTER = _OnlyWhenDebugging()

_tag = ""


def process_tag() -> str:
    """A short random name for this process (8 hex digits), new in each forked child: ids it
    hands out and messages it publishes carry it, so no other process takes them for its own."""
    global _tag
    if not _tag:
        _tag = secrets.token_hex(4)
    return _tag


def _new_tag_after_fork() -> None:
    global _tag
    _tag = ""


os.register_at_fork(after_in_child=_new_tag_after_fork)


def others_patterns(base: str, tag: str) -> list[str]:
    """Glob patterns that match ``base`` + every other process's tag, each exactly once, and
    never ``base`` + ``tag``: one per position where another tag first differs from this one
    (``base`` + ``tag[:i]`` + ``[^tag[i]]`` + ``*``). A process that subscribes to these never
    gets its own messages back."""
    escaped = "".join("\\" + c if c in "\\*?[]^" else c for c in base)
    return [f"{escaped}{tag[:i]}[^{tag[i]}]*" for i in range(len(tag))]


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
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"state must be 'memory' or a redis:// / rediss:// URL, got {url!r}")
        require("redis", f"state = {url.partition('://')[0]}://…")  # the URL may hold a password
        import coredis

        from .redis_client import freeze_coredis_config

        freeze_coredis_config()  # coredis would read os.environ on every command
        self.url = url
        self.display = display_url(url)
        self.prefix = prefix
        self.timeout = timeout
        self.client = coredis.Redis.from_url(url, connect_timeout=timeout, stream_timeout=timeout)
        #: the lean client for the link's own frequent commands (session records, the bus's
        #: messages): several commands per round trip, without coredis's per-command machinery
        self.resp = RespPool(url)
        logging.getLogger("coredis").addFilter(_CLIENT_LOG_FILTER)
        self.handlers: dict[str, list[Handler]] = {}
        #: run after the bus is back from an outage, to make good what it missed
        self.resubscribed: list[Callable[[], Awaitable[None]]] = []
        self._down_since: float | None = None
        self._refusing_since: float | None = None  # since when Redis answers commands with errors
        self._refused_at = 0.0  # its latest error reply
        self.ok = False  # the latest command reached Redis

    @property
    def tag(self) -> str:
        """This process, on the bus (a forked worker gets its own)."""
        return process_tag()

    @property
    def channel(self) -> str:
        """Where this process publishes: a channel of its own on the bus, which every other
        process reads (:func:`others_patterns`) and this one does not."""
        return f"{self.prefix}:bus:{process_tag()}"

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator["RedisLink"]:
        async with self.client:
            try:
                await self.call(lambda r: r.ping(), at_start=True)
            except StateUnavailable:
                pass  # logged; the server starts all the same and recovers when Redis is back
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._listen)
                    try:
                        yield self
                    finally:
                        nursery.cancel_scope.cancel()
            finally:
                self.resp.close()

    @contextlib.contextmanager
    def request_budget(self) -> Iterator[None]:
        """Hold one deadline for every command of the request the current task serves (and of
        the tasks it starts): ``timeout`` from now, not ``timeout`` per command."""
        token = _budget.set(_Budget(trio.current_time() + self.timeout))
        try:
            yield
        finally:
            _budget.reset(token)

    def _deadline(self) -> float:
        """When the next command must be done: ``timeout`` from now, or sooner if the request
        it serves has used its budget. A request that outlives its budget (a long stream, a
        slow tool) gets a new one while Redis answers; while it does not, it waits no more."""
        now = trio.current_time()
        budget = _budget.get()
        if budget is None:
            return now + self.timeout
        if budget.deadline <= now and self.ok:
            budget.deadline = now + self.timeout
        return min(now + self.timeout, budget.deadline)

    async def call(self, command: Callable[[Any], Awaitable[T]], *, at_start: bool = False) -> T:
        """Run ``command(client)`` within the request's deadline; StateUnavailable if Redis is
        out of reach or refuses the command (logged once per outage, never shown to clients)."""
        from coredis.exceptions import RedisError, ResponseError

        deadline = self._deadline()
        if deadline <= trio.current_time():
            raise StateUnavailable(self.display)  # this request has waited its share already
        try:
            with trio.fail_at(deadline):
                result = await command(self.client)
        except ResponseError as exc:  # an error reply: Redis is there, and says no
            self._refused(exc)
            raise StateUnavailable(self.display, REFUSING) from None
        except (trio.TooSlowError, OSError, RedisError) as exc:
            self._failed(exc, at_start)
            raise StateUnavailable(self.display) from None
        except BaseExceptionGroup as group:  # from coredis's task groups
            cancelled = group.subgroup(trio.Cancelled)
            if cancelled is not None:
                raise cancelled from None  # the caller is cancelled: not Redis's failure
            reply = group.subgroup(ResponseError)
            if reply is not None:
                self._refused(reply.exceptions[0])
                raise StateUnavailable(self.display, REFUSING) from None
            self._failed(group, at_start)
            raise StateUnavailable(self.display) from None
        except Exception as exc:
            if not type(exc).__module__.startswith(("coredis", "anyio", "trio")):
                raise  # our own mistake: a traceback, not an outage
            self._failed(exc, at_start)
            raise StateUnavailable(self.display) from None
        self._recovered()
        return result

    async def run(self, *commands: tuple[Any, ...]) -> list[Any]:
        """Send ``commands`` (each a tuple: name, arguments) in one round trip on the lean client
        (with what concurrent requests send meanwhile), within the request's deadline; their
        replies. StateUnavailable as :meth:`call` says, and also when any of them got an error reply."""
        replies = await self._send(commands)
        self._accepted(replies)
        return replies

    async def script(self, script: Script, keys: list[Any], args: list[Any]) -> Any:
        """Run a Lua script in one command by its hash (EVALSHA); with its text (EVAL) when Redis
        does not know it yet (a restart, a flush). Its reply; StateUnavailable as :meth:`run` says."""
        replies = await self._send((("EVALSHA", script.sha, len(keys), *keys, *args),))
        if isinstance(replies[0], RespError) and str(replies[0]).startswith("NOSCRIPT"):
            replies = await self._send((("EVAL", script.text, len(keys), *keys, *args),))
        self._accepted(replies)
        return replies[0]

    async def _send(self, commands: tuple[tuple[Any, ...], ...]) -> list[Any]:
        deadline = self._deadline()
        if deadline <= trio.current_time():
            raise StateUnavailable(self.display)
        try:
            with trio.CancelScope(deadline=deadline):
                return await self.resp.execute(*commands)
        except RespError as exc:  # AUTH or SELECT refused on a new connection
            self._refused(exc)
            raise StateUnavailable(self.display, REFUSING) from None
        except (OSError, ValueError) as exc:
            self._failed(exc)
            raise StateUnavailable(self.display) from None
        self._failed(trio.TooSlowError())  # the deadline passed (the scope caught its cancellation)
        raise StateUnavailable(self.display)

    def _accepted(self, replies: list[Any]) -> None:
        for reply in replies:
            if isinstance(reply, RespError):
                self._refused(reply)
                raise StateUnavailable(self.display, REFUSING)
        self._recovered()

    async def transaction(self, *commands: tuple[Any, ...]) -> list[Any]:
        """``commands`` in one MULTI/EXEC, one round trip: their replies, all applied or none."""
        replies = await self.run(("MULTI",), *commands, ("EXEC",))
        results = replies[-1]
        for reply in results or ():
            if isinstance(reply, RespError):
                self._refused(reply)
                raise StateUnavailable(self.display, REFUSING)
        if results is None:  # aborted (no WATCH is used: not expected)
            raise StateUnavailable(self.display, REFUSING)
        return results

    def message(self, kind: str, **payload: Any) -> tuple[str, str, bytes]:
        """A PUBLISH of a bus message, to send with other commands (see :meth:`publish`)."""
        tag = process_tag()
        return ("PUBLISH", f"{self.prefix}:bus:{tag}", msgspec.json.encode({"k": kind, "o": tag, **payload}))

    def _failed(self, exc: BaseException, at_start: bool = False) -> None:
        self.ok = False
        if self._down_since is None:
            self._down_since = time.monotonic()
            if at_start:
                log.error("shared state %s cannot be reached at start-up (%s); serving without it, requests that need it "
                          "get 503 until it is back: start Redis there, or drop --state (MCPKIT_STATE, state in the "
                          "config file) to keep state in this process", self.display, _kind(exc))
            else:
                log.error("shared state %s cannot be reached (%s); requests that need it get 503 until it is back",
                          self.display, _kind(exc))

    def _refused(self, exc: BaseException) -> None:
        self._reached()  # it answered
        now = time.monotonic()
        if self._refusing_since is None:
            self._refusing_since = now
            log.error("shared state %s is refusing commands (%s: %s); requests that need it get 503 until it accepts them",
                      self.display, type(exc).__name__, reply_text(exc))
        self._refused_at = now

    def _reached(self) -> None:
        self.ok = True
        if self._down_since is not None:
            log.warning("shared state %s is reachable again after %.1f s", self.display, time.monotonic() - self._down_since)
            self._down_since = None

    def _recovered(self) -> None:
        """A command succeeded."""
        self._reached()
        now = time.monotonic()
        if self._refusing_since is not None and now - self._refused_at > REFUSAL_QUIET_S:
            log.warning("shared state %s accepts commands again after %.1f s", self.display, now - self._refusing_since)
            self._refusing_since = None

    @property
    def refusing(self) -> bool:
        """Redis answered a command with an error lately (and has not been quiet since)."""
        return self._refusing_since is not None and time.monotonic() - self._refused_at <= REFUSAL_QUIET_S

    # -- the bus ------------------------------------------------------------------------------------
    def on(self, kind: str, handler: Handler) -> None:
        self.handlers.setdefault(kind, []).append(handler)

    async def publish(self, kind: str, **payload: Any) -> None:
        await self.run(self.message(kind, **payload))

    async def _listen(self) -> None:
        """Deliver bus messages from other processes to the handlers, reconnecting for ever.
        The bus is read on a connection of the lean client, subscribed to the other processes'
        channels only: a process alone (or with Redis for its state only) reads nothing, and
        none reads back what it published itself."""
        delay = 0.2
        first = True
        while True:
            conn = None
            try:
                # a lost connection reaches this loop, which makes good what was missed (and
                # what Redis lost, if it restarted empty) once it is back
                with trio.fail_after(self.timeout):
                    conn = await self.resp.psubscribe(*others_patterns(f"{self.prefix}:bus:", process_tag()))
                delay = 0.2
                self._reached()
                if not first:
                    for catch_up in self.resubscribed:
                        await catch_up()
                first = False
                async for reply in conn.replies():
                    if isinstance(reply, list) and len(reply) == 4 and reply[0] == b"pmessage":
                        self._dispatch(reply[3])
            except (OSError, RespError, ValueError, trio.TooSlowError) as exc:
                self._failed(exc)
            except StateUnavailable:
                pass  # a catch-up's command failed (logged there): it runs again once subscribed again
            finally:
                if conn is not None:
                    conn.close()
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
            return {"backend": "redis", "url": self.display, "ok": False, "problem": UNREACHABLE}
        latency = round((time.perf_counter() - started) * 1000, 2)
        if self.refusing:
            return {"backend": "redis", "url": self.display, "ok": False, "problem": REFUSING, "latency_ms": latency}
        return {"backend": "redis", "url": self.display, "ok": True, "latency_ms": latency}


def _kind(exc: BaseException) -> str:
    """The name of what went wrong, looking inside exception groups (coredis's task groups), and
    what it says ("Connection refused", an untrusted TLS certificate): a connection failure's
    text, which never holds the password (error replies go through :func:`reply_text`)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    inner = exc.__cause__ or exc.__context__  # a client library's wrapper around the system's error
    for _ in range(3):
        if inner is None:
            break
        if isinstance(inner, OSError) and str(inner):
            said += f" ({type(inner).__name__}: {inner})"
            break
        inner = inner.__cause__ or inner.__context__
    return said[:300]


def reply_text(exc: BaseException) -> str:
    """What Redis said, for the log: without the pipeline command (it holds our data) or the
    script hash coredis adds, and short."""
    text = str(exc)
    text = text.rpartition(" of pipeline caused error: ")[2]
    text = re.split(r"\.? script: [0-9a-f]+", text)[0]
    return text[:160]


def _nx() -> Any:
    from coredis import PureToken

    return PureToken.NX

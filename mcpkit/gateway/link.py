"""One upstream server and the one long-lived session the gateway holds with it.

The link connects at start-up (the era is found the way :mod:`mcpkit.client` finds it), lists
what the upstream offers, then watches the session: a ``list_changed`` from the upstream is
re-listed, a resource update is passed on. When the session ends (the process exits, the
server goes away, it sends garbage or stops answering) the link reconnects with exponential
back-off and lists again; calls made meanwhile answer at once with what is wrong. Calls never
open a session of their own.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

import trio

from ..client.client import Client, connect
from ..client.errors import ConnectionClosed, ConnectionFailed, McpError, RequestTimeout, SessionExpired
from ..client.options import ClientSettings
from .settings import UpstreamSettings

log = logging.getLogger("mcpkit.gateway")

#: seconds a probe (ping or server/discover) of an upstream that let a call time out may take
PROBE_TIMEOUT_S = 5.0


@dataclass
class Listing:
    """What the upstream offers, as it listed it (dicts, untouched)."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    capabilities: dict[str, Any] = field(default_factory=dict)


class Unavailable(Exception):
    """The upstream has no session right now (connecting, retrying, failed)."""


class Link:
    """The session with one upstream, kept alive for the life of the server."""

    def __init__(self, settings: UpstreamSettings, *, listed: Callable[..., Awaitable[None]],
                 updated: Callable[[str], Awaitable[None]], handlers: dict[str, Any]) -> None:
        self.settings = settings
        self._listed = listed
        self._updated = updated
        self._handlers = handlers
        self.state = "connecting"
        self.error: str | None = None
        self.since = time.time()
        self.attempts = 0
        self.next_attempt: float | None = None
        self.client: Client | None = None
        self.description: Any = None  # the last session's ServerDescription
        self.listing = Listing()
        #: set once the first attempt has ended (connected, or failed)
        self.first_attempt = trio.Event()
        self._restart: trio.CancelScope | None = None
        self._probing = False

    # -- what the world sees -------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """The state for /healthz and ``mcpkit plugins`` (never a header or a secret)."""
        s = self.settings
        out: dict[str, Any] = {"state": self.state, "transport": s.transport, "target": s.describe(),
                               "since": round(self.since, 3), "attempts": self.attempts}
        if self.error:
            out["error"] = self.error
        if self.next_attempt is not None and self.state == "retrying":
            out["retry_in_s"] = round(max(0.0, self.next_attempt - time.time()), 1)
        desc = self.description
        if desc is not None:
            out["protocol"] = desc.protocol_version
            out["server"] = desc.server_info
        return out

    def unavailable(self) -> Unavailable:
        why = f": {self.error}" if self.error else ""
        return Unavailable(f"upstream {self.settings.name} is not connected ({self.state}{why})")

    def _set(self, state: str, error: str | None = None) -> None:
        if state != self.state or error != self.error:
            self.since = time.time()
        self.state, self.error = state, error

    # -- the session ---------------------------------------------------------------------------
    async def run(self) -> None:
        """Connect, serve, reconnect with back-off, for ever (or ``max_attempts`` failures)."""
        s = self.settings
        delay = s.backoff
        failures = 0
        while True:
            self.attempts += 1
            error = "the session ended"
            try:
                with trio.CancelScope() as self._restart:
                    async with self._connect() as client:
                        await self._serve(client)
                if self._restart.cancelled_caught and self.error:
                    error = self.error
            except Unavailable as exc:
                error = str(exc)
            except McpError as exc:
                error = exc.message
                if exc.http_status is not None and str(exc.http_status) not in error:
                    error += f" (HTTP {exc.http_status})"
            except (OSError, ValueError) as exc:
                error = f"{type(exc).__name__}: {exc}"
            except Exception as exc:  # a bug here must not stop the server: reported, retried
                log.exception("upstream %s: unexpected error", s.name)
                error = f"internal error: {type(exc).__name__}: {exc}"
            finally:
                self.client = None
                self._restart = None
            if self.state == "connected":  # a session that worked: back-off starts over
                failures, delay = 0, s.backoff
            failures += 1
            self.first_attempt.set()
            if s.max_attempts and failures >= s.max_attempts:
                self._set("failed", error)
                log.error("upstream %s: %s; giving up after %d attempts", s.name, error, failures)
                return
            self.next_attempt = time.time() + delay
            self._set("retrying", error)
            log.warning("upstream %s (%s): %s; retrying in %.1f s", s.name, s.describe(), error, delay)
            await trio.sleep(delay)
            delay = min(delay * 2, s.max_backoff)

    def restart(self, reason: str) -> None:
        """End the session now (it is reconnected): garbage, an oversized message, no answer."""
        if self._restart is not None and not self._restart.cancel_called:
            log.warning("upstream %s: %s; restarting the session", self.settings.name, reason)
            self.error = reason
            self._restart.cancel()

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[Client]:
        s = self.settings
        self._set("connecting", self.error)
        settings = ClientSettings(
            client_name="mcpkit-gateway", initialize_timeout=s.connect_timeout,
            probe_timeout=min(5.0, s.connect_timeout), request_timeout=None, retries=0, remember_era=False,
            prefetch_tools=False, headers=dict(s.headers), oauth=_oauth(s),
        )
        if s.protocol in ("stateless", "handshake"):
            settings.mode = s.protocol  # type: ignore[assignment]
        elif s.protocol != "auto":
            settings.protocol_version = s.protocol
        if s.command is not None:
            from ..client.transports.stdio import StdioTransport

            settings.transport = StdioTransport(s.command, env=s.env or None, cwd=s.cwd, stderr=_stderr(s.stderr),
                                                max_line=s.max_message_bytes)
        handlers = dict(self._handlers)
        handlers["bad_message"] = lambda err: self.restart(f"it sent a message that could not be used: {err.message}")
        # the era probe and the handshake are bounded by the settings' timeouts
        async with connect(s.target(), settings, **_connect_handlers(handlers)) as client:
            yield client

    async def _serve(self, client: Client) -> None:
        """List, announce, then watch the session until it ends."""
        s = self.settings
        listing = await self._list(client)
        self.client, self.description = client, client.description
        self.listing = listing
        await self._listed(listing, {"tools", "prompts", "resources"})
        self.next_attempt = None
        self._set("connected")
        desc = client.description
        assert desc is not None
        log.info("upstream %s (%s): connected, protocol %s, %d tools, %d prompts, %d resources", s.name, s.describe(),
                 desc.protocol_version, len(listing.tools), len(listing.prompts), len(listing.resources) + len(listing.templates))
        self.first_attempt.set()
        await self._watch(client)

    async def _list(self, client: Client, kinds: set[str] | None = None) -> Listing:
        caps = client.description.capabilities if client.description is not None else {}
        old = self.listing
        out = Listing(old.tools, old.prompts, old.resources, old.templates, caps)
        kinds = kinds if kinds is not None else {"tools", "prompts", "resources"}
        if "tools" in kinds:
            out.tools = await client.list_tools(refresh=True) if "tools" in caps else []
        if "prompts" in kinds:
            out.prompts = await client.list_prompts() if "prompts" in caps else []
        if "resources" in kinds:
            out.resources = await client.list_resources() if "resources" in caps else []
            out.templates = await client.list_resource_templates() if "resources" in caps else []
        return out

    async def _watch(self, client: Client) -> None:
        """Follow the upstream's notifications until the session ends."""
        session = client.session
        assert session is not None and client.description is not None
        caps = client.description.capabilities
        subscribe = bool((caps.get("resources") or {}).get("subscribe"))
        uris = [r["uri"] for r in self.listing.resources if isinstance(r.get("uri"), str)][:1000] if subscribe else []
        send, notes = session.listen(256)
        async with trio.open_nursery() as nursery:
            if session.era == "stateless":
                spec: dict[str, Any] = {"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True}
                if uris:
                    spec["resourceSubscriptions"] = uris
                nursery.start_soon(self._listen_stream, client, spec)
            else:
                nursery.start_soon(self._subscribe, client, uris)
            try:
                async for note in notes:
                    await self._on_note(client, note.method, note.params)
            finally:
                send.close()
                nursery.cancel_scope.cancel()

    async def _listen_stream(self, client: Client, spec: dict[str, Any]) -> None:
        """Stateless upstream: one subscriptions/listen request held open; when it ends, so
        does the session (it is reconnected: the upstream restarted or went away)."""
        assert client.session is not None
        try:
            await client.session.request("subscriptions/listen", {"notifications": spec}, timeout=None)
            self.restart("its subscription stream ended")
        except McpError as exc:
            self.restart(f"its subscription stream failed: {exc.message}")

    async def _subscribe(self, client: Client, uris: list[str]) -> None:
        assert client.session is not None
        for uri in uris:
            try:
                await client.session.request("resources/subscribe", {"uri": uri}, timeout=PROBE_TIMEOUT_S)
            except McpError as exc:
                log.info("upstream %s: could not subscribe to %s: %s", self.settings.name, uri, exc.message)
                return

    async def _on_note(self, client: Client, method: str, params: dict[str, Any]) -> None:
        kind = {"notifications/tools/list_changed": "tools", "notifications/prompts/list_changed": "prompts",
                "notifications/resources/list_changed": "resources"}.get(method)
        if kind is not None:
            try:
                self.listing = await self._list(client, {kind})
            except McpError as exc:
                log.warning("upstream %s: re-listing %s failed: %s", self.settings.name, kind, exc.message)
                return
            await self._listed(self.listing, {kind}, True)
        elif method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
            await self._updated(params["uri"])

    # -- health of a live session ------------------------------------------------------------------
    def call_failed(self, exc: McpError) -> None:
        """A call failed: a lost connection restarts the session, a timeout probes it."""
        if isinstance(exc, (ConnectionClosed, ConnectionFailed, SessionExpired)):
            self.restart(exc.message)

    def check_alive(self, nursery: trio.Nursery) -> None:
        """A call ran out of time: make sure the upstream still answers (in the background)."""
        if not self._probing and self.client is not None:
            self._probing = True
            nursery.start_soon(self._probe, self.client)

    async def _probe(self, client: Client) -> None:
        try:
            await client.ping(timeout=PROBE_TIMEOUT_S)
        except RequestTimeout:
            if self.client is client:
                self.restart(f"it did not answer a ping within {PROBE_TIMEOUT_S:g} s")
        except McpError as exc:
            if self.client is client:
                self.call_failed(exc)
        finally:
            self._probing = False


def _stderr(spec: str) -> Any:
    if spec == "inherit":
        return None
    if spec == "discard":
        return subprocess.DEVNULL
    return open(spec, "ab")  # noqa: SIM115 - the child holds it for its life


def _oauth(s: UpstreamSettings) -> Any:
    o = s.oauth
    if o is None:
        return None
    from ..client.oauth import FileTokenStore, OAuth, default_token_file

    store = FileTokenStore(o.token_file or default_token_file())
    if o.grant == "client_credentials":
        return OAuth(grant="client_credentials", client_id=o.client_id, client_secret=o.client_secret,
                     scopes=o.scopes, store=store, client_name="mcpkit gateway")
    return OAuth(authorizer=_NoSignIn(s.name), store=store, client_name="mcpkit gateway", client_id=o.client_id,
                 client_secret=o.client_secret, scopes=o.scopes)


class _NoSignIn:
    """A gateway runs unattended: a stored sign-in that is gone cannot be renewed here."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def redirect_uri(self) -> str:
        return "http://127.0.0.1/callback"

    async def authorize(self, url: str) -> dict[str, str]:
        raise ConnectionFailed(f"upstream {self.name} needs a sign-in: run `mcpkit call --oauth` against it once to "
                               "store one (the gateway cannot open a browser)")


def _connect_handlers(h: dict[str, Any]) -> dict[str, Any]:
    """``connect()`` keyword arguments for the gateway's relaying handlers."""
    return {"on_log": h.get("log"), "on_elicitation": h.get("elicitation"), "on_sampling": h.get("sampling"),
            "roots": [], "on_request": h.get("request"), "on_bad_message": h.get("bad_message")}


__all__ = ["Link", "Listing", "Unavailable"]

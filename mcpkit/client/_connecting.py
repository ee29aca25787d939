"""Finding a server's era and opening the conversation: the ``server/discover`` probe, the
``initialize`` handshake, and the fall-back to legacy HTTP+SSE, following the 2026-07-28
backward-compatibility rules. The answer is remembered per server for the life of the process.
"""


from __future__ import annotations

import logging
from typing import Any, Sequence

import trio

from ..protocol.types import META_SERVER_INFO
from ..protocol.versions import HANDSHAKE_VERSIONS, LATEST, LATEST_HANDSHAKE, STATELESS_VERSIONS
from .errors import (
    BadResponse,
    ConnectionFailed,
    HttpError,
    McpError,
    MODERN_CODES,
    RequestTimeout,
    RpcError,
    UnsupportedVersion,
)
from .results import ServerDescription
from .session import Handlers, Session
from .options import ClientSettings
from .transports import Transport

log = logging.getLogger("mcpkit.client")

#: What each server turned out to speak: target key -> "stateless", "handshake" or "sse"
_ERA_MEMORY: dict[str, str] = {}


def is_url(target: str | Sequence[str]) -> bool:
    return isinstance(target, str) and target.lower().startswith(("http://", "https://"))


def forget_eras() -> None:
    """Drop what was learnt about servers' eras (tests, or after a server upgrade)."""
    _ERA_MEMORY.clear()



class Connecting:
    """Mixed into Client: everything up to the first ordinary request."""

    target: str | Sequence[str]
    settings: ClientSettings
    handlers: Handlers
    session: Session | None
    description: ServerDescription | None
    _key: str

    def _headers_for(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        raise NotImplementedError

    def _list_changed(self, method: str) -> None:
        raise NotImplementedError

    async def list_tools(self, *, refresh: bool = False) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def _connect(self, nursery: trio.Nursery) -> None:
        s = self.settings
        pinned = s.protocol_version
        if pinned is not None and pinned not in HANDSHAKE_VERSIONS + STATELESS_VERSIONS:
            raise UnsupportedVersion(f"this client does not speak protocol version {pinned}", None,
                                     {"supported": list(HANDSHAKE_VERSIONS + STATELESS_VERSIONS)})
        era = s.mode
        if pinned is not None:
            era = "stateless" if pinned in STATELESS_VERSIONS else "handshake"
        remembered = _ERA_MEMORY.get(self._key) if s.remember_era and era == "auto" else None
        if is_url(self.target):
            await self._connect_http(nursery, era, remembered)
        else:
            await self._connect_stdio(nursery, era, remembered)
        assert self.session is not None and self.description is not None
        if s.remember_era:
            kind = "sse" if self.description.transport == "sse" else self.description.era
            _ERA_MEMORY[self._key] = kind
        if s.prefetch_tools and "tools" in self.description.capabilities:
            try:
                await self.list_tools()
            except McpError as exc:
                log.warning("could not fetch the tool list after connecting: %s", exc)

    def _session(self, transport: Transport) -> Session:
        s = self.settings
        session = Session(transport, self.handlers, uuid_ids=s.uuid_ids, request_timeout=s.request_timeout,
                          log_level=s.log_level, client_info={"name": s.client_name, "version": s.client_version},
                          tasks=s.tasks)
        session.header_source = self._headers_for
        session.on_list_changed = self._list_changed
        return session

    async def _connect_stdio(self, nursery: trio.Nursery, era: str, remembered: str | None) -> None:
        from .transports.stdio import StdioTransport

        transport = self.settings.transport or StdioTransport(self.target, stderr=self.settings.server_stderr)
        self.session = session = self._session(transport)
        await session.start(nursery)
        if era == "handshake" or remembered == "handshake":
            await self._initialize(session)
            return
        probe = self.settings.probe_timeout if era == "auto" else self.settings.initialize_timeout
        if not await self._discover(session, probe, fallback_allowed=era == "auto"):
            await self._initialize(session)

    async def _connect_http(self, nursery: trio.Nursery, era: str, remembered: str | None) -> None:
        from .transports.http import HttpTransport

        if remembered == "sse":
            await self._connect_legacy_sse(nursery)
            return
        transport = HttpTransport(str(self.target), **self._http_options())
        self.session = session = self._session(transport)
        await session.start(nursery)
        if era != "handshake" and remembered != "handshake":
            if await self._discover(session, self.settings.initialize_timeout, fallback_allowed=era == "auto"):
                return
        try:
            await self._initialize(session)
        except (HttpError, RpcError) as exc:
            status = exc.http_status
            if era == "stateless" or status not in (400, 404, 405) or _is_modern(exc):
                raise
            log.info("no Streamable HTTP at %s (HTTP %s); trying the legacy HTTP+SSE transport", self.target, status)
            await session.aclose()
            try:
                await self._connect_legacy_sse(nursery)
            except ConnectionFailed as legacy:
                if status != 404 or legacy.http_status != 404:
                    raise
                raise ConnectionFailed(
                    f"no MCP server at {self.target}: it answered HTTP 404 both to POST (Streamable HTTP) and "
                    f"to GET (legacy HTTP+SSE); check the path (servers usually listen on /mcp, "
                    f"legacy ones on /sse)") from None

    async def _connect_legacy_sse(self, nursery: trio.Nursery) -> None:
        from .transports.legacy_sse import LegacySseTransport

        self.session = session = self._session(LegacySseTransport(str(self.target), **self._http_options()))
        await session.start(nursery)
        await self._initialize(session)

    def _http_options(self) -> dict[str, Any]:
        s = self.settings
        return {"headers": s.headers, "auth_token": s.auth_token, "retries": s.retries, "backoff": s.backoff,
                "oauth": s.oauth}

    async def _discover(self, session: Session, timeout: float, *, fallback_allowed: bool) -> bool:
        """Probe the stateless era. True when the server speaks it (and we are ready)."""
        wanted = self.settings.protocol_version or LATEST
        if wanted not in STATELESS_VERSIONS:
            wanted = LATEST
        for attempt in range(2):
            session.era, session.version = "stateless", wanted
            session.transport.protocol_version = wanted
            try:
                result = await session.request("server/discover", timeout=timeout, cancel_on_timeout=False)
            except UnsupportedVersion as exc:
                retry = self._retry_version(exc) if attempt == 0 else None
                if retry is not None:
                    wanted = retry
                    continue
                if fallback_allowed and any(v in HANDSHAKE_VERSIONS for v in exc.supported):
                    break
                raise
            except (RpcError, HttpError, RequestTimeout, BadResponse) as exc:
                if not fallback_allowed or _is_modern(exc):
                    raise
                log.debug("server/discover failed (%s): assuming a handshake-era server", exc)
                break
            if not isinstance(result, dict):
                raise BadResponse("server/discover returned something that is not an object")
            supported = [v for v in result.get("supportedVersions") or [] if isinstance(v, str)]
            if supported and wanted not in supported:
                ours = [v for v in supported if v in STATELESS_VERSIONS]
                if not ours:
                    if fallback_allowed:
                        break
                    raise UnsupportedVersion("the server supports none of this client's stateless versions",
                                             None, {"supported": supported})
                wanted = ours[0]
                session.version = session.transport.protocol_version = wanted
            meta = result.get("_meta") if isinstance(result.get("_meta"), dict) else {}
            info = meta.get(META_SERVER_INFO) or result.get("serverInfo") or {}
            self.description = ServerDescription(
                "stateless", wanted, session.transport.kind, info if isinstance(info, dict) else {},
                result.get("capabilities") if isinstance(result.get("capabilities"), dict) else {},
                result.get("instructions") if isinstance(result.get("instructions"), str) else None,
                supported)
            return True
        session.era, session.version = None, None
        session.transport.protocol_version = None
        return False

    def _retry_version(self, exc: UnsupportedVersion) -> str | None:
        """The stateless version to retry with after ``exc`` (-32022), or None to give up.

        The spec says to retry with a version from the error's ``supported`` list; that may be the
        very version just sent. A pinned version is never traded for another one.
        """
        ours = [v for v in STATELESS_VERSIONS if v in exc.supported]
        pinned = self.settings.protocol_version
        if pinned is not None:
            return pinned if pinned in ours else None
        return ours[-1] if ours else None

    async def _initialize(self, session: Session) -> None:
        """The three-step handshake: initialize, its answer, then notifications/initialized."""
        s = self.settings
        version = s.protocol_version if s.protocol_version in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
        session.era, session.version, session.ready = "handshake", version, False
        session.transport.protocol_version = None
        params = {"protocolVersion": version, "capabilities": session.capabilities,
                  "clientInfo": session.client_info}
        delay = s.backoff
        for attempt in range(s.retries + 1):
            try:
                result = await session.request("initialize", params, timeout=s.initialize_timeout)
                break
            except (ConnectionFailed, RequestTimeout) as exc:
                # The transport already retried failed connects with back-off: do not multiply them.
                if attempt == s.retries or session.transport.kind == "stdio" or isinstance(exc, ConnectionFailed):
                    raise
                await trio.sleep(delay)
                delay *= 2
        if not isinstance(result, dict) or not isinstance(result.get("protocolVersion"), str):
            raise BadResponse("the initialize result has no protocolVersion")
        negotiated = result["protocolVersion"]
        if negotiated not in HANDSHAKE_VERSIONS:
            raise UnsupportedVersion(f"the server answered with protocol version {negotiated}, "
                                     "which this client does not speak", None,
                                     {"supported": list(HANDSHAKE_VERSIONS), "requested": negotiated})
        session.version = negotiated
        session.transport.protocol_version = negotiated
        await session.notify("notifications/initialized")
        session.ready = True
        caps = result.get("capabilities") if isinstance(result.get("capabilities"), dict) else {}
        info = result.get("serverInfo") if isinstance(result.get("serverInfo"), dict) else {}
        self.description = ServerDescription("handshake", negotiated, session.transport.kind, info, caps,
                                             result.get("instructions") if isinstance(result.get("instructions"), str) else None)
        start_listening = getattr(session.transport, "start_listening", None)
        if start_listening is not None:
            await start_listening()
        if s.log_level and "logging" in caps:
            try:
                await session.request("logging/setLevel", {"level": s.log_level})
            except McpError as exc:
                log.warning("the server refused logging/setLevel: %s", exc)


def _is_modern(exc: McpError) -> bool:
    return isinstance(exc, RpcError) and exc.rpc_code in MODERN_CODES


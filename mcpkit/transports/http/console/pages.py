"""The console's routes under ``/console``: the page and its static files, the JSON API, the
live events (SSE) and the token login. See docs/console.md.

- ``GET /console`` — the page (plain HTML, CSS and JS from this package: no CDN, no build step)
- ``GET /console/api/catalog`` — plugins (errors, warnings, conflicts, state), tools with their
  schemas, resources, prompts, upstreams
- ``GET /console/api/state`` — sessions, calls in flight, recent calls, p50/p99 per tool, tasks,
  reloads (merged across workers, see :mod:`.share`)
- ``POST /console/api/call`` — ``{"tool", "arguments"}``: a try-it call (see :mod:`.tryit`)
- ``GET /console/events`` — SSE: ``call`` (start, end), ``sessions``, ``streams``, ``changed``
  (list changes, task status), ``reload`` (``mcpkit dev``), ``tick`` (another worker moved)
- ``POST /console/login`` — the operator token, typed into the page, becomes a cookie
"""

from __future__ import annotations

import html
import importlib.resources
import logging
import time
import urllib.parse
from collections import deque
from typing import Any

import msgspec
import trio

from ..exchange import Exchange
from ..wire import BodyTooLarge, rest_error
from .access import ConsoleAccess
from .observer import VIEWER_QUEUE, ConsoleObserver, Viewer, sse
from .share import EVERY_S, WorkerShare, merge
from .tryit import CONSOLE_PRINCIPAL, call_tool, catalog, catalog_upstreams

log = logging.getLogger("mcpkit.console")
PATH = "/console"
_STATIC = {"console.js": b"text/javascript; charset=utf-8", "console.css": b"text/css; charset=utf-8"}
_HTML = b"text/html; charset=utf-8"
_NO_STORE = [(b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY")]
#: a keep-alive comment on an idle event stream this often
HEARTBEAT_S = 15.0
#: an event stream is written at most this often (events meanwhile go out in one write)
BATCH_S = 0.1
#: event streams open at once (each may hold a queue of VIEWER_QUEUE events)
MAX_VIEWERS = 16
#: running tasks listed per worker
MAX_TASKS = 100
#: the largest try-it request body
MAX_CALL_BYTES = 1024 * 1024


def _asset(name: str) -> bytes:
    return importlib.resources.files(__package__).joinpath("static", name).read_bytes()


class Console:
    """The console of one HTTP app (made only when the ``console`` setting is on)."""

    def __init__(self, http_app: Any) -> None:
        self.http_app = http_app
        self.app = http_app.app
        self.access = ConsoleAccess(self.app.settings)
        self.observer = ConsoleObserver()
        self.app.observers.add(self.observer)
        self.app.console_path = PATH  # mcpkit dev prints the console's address
        self.share = WorkerShare.from_env()
        self.reloads: deque[dict[str, Any]] = deque(maxlen=20)
        self.task_updates: deque[dict[str, Any]] = deque(maxlen=50)
        self.closing = False
        self.assets = {name: _asset(name) for name in ("console.html", *_STATIC)}

    # -- background ----------------------------------------------------------------------------
    async def run(self) -> None:
        """While the app runs: follow the change hub (list changes, reloads, tasks) and, with
        workers, share this worker's state."""
        async with trio.open_nursery() as nursery:
            if self.share is not None:
                nursery.start_soon(self._share_forever)
            await self._follow_changes()
            nursery.cancel_scope.cancel()

    async def _follow_changes(self) -> None:
        with self.app.hub.listen() as changes:
            async for event, arg in changes:
                if event == "dev/reload" and isinstance(arg, dict):
                    self.reloads.append({**arg, "at": time.time()})
                    self.observer.push("reload", arg)
                elif event == "task":
                    owner, task_id, detail = arg
                    self.task_updates.append({"taskId": task_id, "status": detail.get("status"),
                                              "statusMessage": detail.get("statusMessage"), "at": time.time()})
                    self.observer.push("changed", {"event": "task"})
                elif event.endswith("/list_changed"):
                    self.observer.push("changed", {"event": event})
        # the hub closed: the server is shutting down, the event streams end now
        self.closing = True
        for viewer in list(self.observer.viewers):
            self.observer.viewers.discard(viewer)
            viewer.send.close()

    async def _share_forever(self) -> None:
        assert self.share is not None
        seen: dict[int, int] = {}
        try:
            while True:
                await trio.to_thread.run_sync(self.share.write, self.local_snapshot())
                if self.observer.viewers:  # another worker's state moved: the page asks again
                    others = await trio.to_thread.run_sync(self.share.others)
                    now = {s["worker"]: s["version"] for s in others}
                    if now != seen:
                        seen = now
                        self.observer.push("tick", {"workers": len(now) + 1})
                await trio.sleep(EVERY_S)
        finally:
            self.share.remove()

    def local_snapshot(self) -> dict[str, Any]:
        snap = self.observer.snapshot()
        snap["version"] = self.observer.version
        snap["tasks"] = [{"taskId": run.record.task_id, "tool": run.record.tool, "status": run.record.status,
                          "statusMessage": run.record.status_message, "created_at": run.record.created_at,
                          "worker": self.observer.pid}
                         for run in list(self.app.tasks.running.values())[:MAX_TASKS]
                         if run.escalating and run.refused is None]  # a call not (yet) a task is not one
        return snap

    async def state(self) -> dict[str, Any]:
        snaps = [self.local_snapshot()]
        if self.share is not None:
            snaps += await trio.to_thread.run_sync(self.share.others)
        out = merge(snaps)
        try:
            out["live_tasks"] = await self.app.tasks.store.count_live()
        except Exception:  # shared state away: the rest still shows
            out["live_tasks"] = None
        out["upstreams"] = catalog_upstreams(self.app)  # their state moves without a list change
        out["task_updates"] = list(self.task_updates)
        out["reloads"] = list(self.reloads)
        out["viewers"] = len(self.observer.viewers)
        out["dropped_viewers"] = self.observer.dropped_viewers
        out["now"] = time.time()
        return out

    # -- routes --------------------------------------------------------------------------------
    async def serve(self, ex: Exchange) -> None:
        path = ex.path
        if path == f"{PATH}/login" and ex.method == "POST":
            await self.login(ex)
            return
        refused = self.access.refusal(ex)
        if refused is not None:
            await self.refuse(ex, *refused)
            return
        sub = path[len(PATH):].rstrip("/")
        if ex.method in ("GET", "HEAD"):
            if sub == "":
                await ex.respond(200, self.assets["console.html"], _NO_STORE, _HTML)
            elif sub.startswith("/static/") and sub[8:] in _STATIC:
                await ex.respond(200, self.assets[sub[8:]], _NO_STORE, _STATIC[sub[8:]])
            elif sub == "/api/catalog":
                await _json(ex, 200, catalog(self.app))
            elif sub == "/api/state":
                await _json(ex, 200, await self.state())
            elif sub == "/events" and ex.method == "GET":
                await self.events(ex)
            else:
                await ex.respond(404, rest_error("NOT_FOUND", "nothing is served at this path"))
        elif ex.method == "POST" and sub == "/api/call":
            await self.call(ex)
        else:
            await ex.respond(405, rest_error("METHOD_NOT_ALLOWED", "this console path does not answer that method"))

    async def refuse(self, ex: Exchange, status: int, why: str) -> None:
        headers = [(b"www-authenticate", b'Bearer realm="mcpkit-console"')] if status == 401 else []
        if ex.method == "GET" and ex.path.rstrip("/") == PATH:
            await ex.respond(status, _login_page(why, self.access.token is not None), headers + _NO_STORE, _HTML)
        else:
            code = "UNAUTHORIZED" if status == 401 else "FORBIDDEN"
            await ex.respond(status, rest_error(code, why), headers)

    async def login(self, ex: Exchange) -> None:
        origin = ex.headers.get("origin")
        if origin is not None and urllib.parse.urlsplit(origin).netloc.lower() != ex.headers.get("host", "").lower():
            await ex.respond(403, rest_error("FORBIDDEN", "the console answers only pages of its own origin"))
            return
        try:
            body = await ex.read_body(4096)
        except BodyTooLarge:
            await ex.respond(413, rest_error("PAYLOAD_TOO_LARGE", "a token is shorter than that"))
            return
        token = urllib.parse.parse_qs(body.decode("utf-8", "replace")).get("token", [""])[0]
        cookie = self.access.login(token)
        if cookie is None:
            status = 401 if self.access.token is not None else 403
            await ex.respond(status, _login_page("that is not the console token", self.access.token is not None),
                             [(b"www-authenticate", b'Bearer realm="mcpkit-console"')] + _NO_STORE, _HTML)
            return
        await ex.respond(303, b"", [(b"set-cookie", cookie.encode()), (b"location", PATH.encode())] + _NO_STORE, None)

    async def call(self, ex: Exchange) -> None:
        if "application/json" not in ex.headers.get("content-type", "").lower():
            await ex.respond(415, rest_error("INVALID_CONTENT_TYPE", "Content-Type must be application/json"))
            return
        try:
            data = msgspec.json.decode(await ex.read_body(min(MAX_CALL_BYTES, self.app.settings.max_message_bytes)))
        except msgspec.DecodeError:
            await ex.respond(400, rest_error("MALFORMED_JSON", "the body is not valid JSON"))
            return
        tool, arguments = (data.get("tool"), data.get("arguments", {})) if isinstance(data, dict) else (None, None)
        if not isinstance(tool, str) or not isinstance(arguments, dict):
            await ex.respond(400, rest_error("INVALID_REQUEST", 'send {"tool": NAME, "arguments": {...}}'))
            return
        streamable = self.http_app.streamable
        principal = CONSOLE_PRINCIPAL if self.http_app.auth is not None else None
        started = time.perf_counter()
        async with ex.cancel_on_disconnect():
            out = await call_tool(self.app, streamable, tool, arguments, principal)
        out["duration_ms"] = round((time.perf_counter() - started) * 1000, 2)
        out["worker"] = self.observer.pid
        await _json(ex, 200, out)

    async def events(self, ex: Exchange) -> None:
        if self.closing:
            await ex.respond(503, rest_error("SHUTTING_DOWN", "the server is shutting down"), [(b"retry-after", b"5")])
            return
        if len(self.observer.viewers) >= MAX_VIEWERS:
            await ex.respond(503, rest_error("TOO_MANY_VIEWERS", f"{MAX_VIEWERS} console pages follow this server already"),
                             [(b"retry-after", b"10")])
            return
        with self.observer.watch() as viewer:
            await ex.start_stream()
            try:
                await ex.send_chunk(b"retry: 2000\n" + sse("hello", {"worker": self.observer.pid}))
                with viewer.scope:
                    async with ex.cancel_on_disconnect():
                        await self._pump(ex, viewer)
                await ex.end_stream()
            except OSError:
                pass  # the viewer went away

    async def _pump(self, ex: Exchange, viewer: Viewer) -> None:
        """Write the viewer's events, at most one write per BATCH_S (a busy server's calls go out
        together, not one write each), a keep-alive when nothing happened for HEARTBEAT_S."""
        last = -BATCH_S
        while True:
            frames = b""
            with trio.move_on_after(HEARTBEAT_S):
                try:
                    frames = await viewer.receive.receive()
                except trio.EndOfChannel:
                    return
            if frames:
                await trio.sleep(max(0.0, last + BATCH_S - trio.current_time()))
                parts = [frames]
                for _ in range(VIEWER_QUEUE):  # what else waits goes out in the same write
                    try:
                        parts.append(viewer.receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                frames = b"".join(parts)
            await ex.send_chunk(frames or b": keep-alive\n\n")
            last = trio.current_time()


async def _json(ex: Exchange, status: int, body: Any) -> None:
    await ex.respond(status, msgspec.json.encode(body), _NO_STORE)


def _login_page(why: str, has_token: bool) -> bytes:
    form = ("<form method=post action=/console/login><label>Console token <input type=password name=token "
            "autocomplete=current-password autofocus></label> <button>Open</button></form>") if has_token else \
        "<p>No console token is set (console_token): the console is open to trusted addresses only.</p>"
    return (f"<!doctype html><meta charset=utf-8><title>mcpkit console</title><style>{_LOGIN_CSS}</style>"
            f"<main><h1>mcpkit console</h1><p>{html.escape(why)}</p>{form}</main>").encode()


_LOGIN_CSS = "body{font:15px system-ui,sans-serif;margin:4em auto;max-width:34em;color:#1d2733}input{padding:.3em}"

"""``--workers N`` on mcpkit's server: one listening socket, N forked processes accepting on it.

The parent binds, loads the plugins once (so a broken plugin fails before any fork), then
forks the workers; each runs the plugin lifespans and serves on its own trio loop. What the
workers share is what docs/http.md says: the socket and the ``requestState`` sealing secret
(the parent's, inherited); sessions, replay stores and plugin state are per process. The
parent supervises: SIGTERM/SIGINT are passed on and waited for (grace period, then SIGKILL);
a worker that dies is replaced, unless they keep dying. A worker whose parent dies (even by
SIGKILL) shuts down as on SIGTERM: the parent holds the only write end of a pipe whose read end
each worker inherits and watches, and the kernel closes it when the parent goes, however it
goes. There is no set-up step to race with: a worker that starts watching after its parent
died finds the pipe ended already.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from typing import Any

import trio

from ...server.app import App
from .binding import listen
from .serve import serve_http, urls

log = logging.getLogger("mcpkit.http")
#: this many worker deaths within RESTART_WINDOW_S means something is wrong: stop
MAX_RESTARTS = 5
RESTART_WINDOW_S = 30.0


def run_forked(app: App, lifespans: list[tuple[str, Any]], *, strict: bool = False, legacy_only: bool = False) -> int:
    s = app.settings
    (sock,) = listen(s)  # a port in use or a bad certificate fails here, once, not in every worker
    stopping = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    # before the banner: whoever reads it may stop the server at once (SIGTERM), and is heard
    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    for url in urls([sock], bool(s.certfile)):
        print(f"mcpkit: serving MCP on {url}/mcp (legacy SSE on {url}/sse) with {s.workers} workers",
              file=sys.stderr, flush=True)
        if s.console:
            print(f"mcpkit: console on {url}/console (each worker merges the others' snapshots)", file=sys.stderr, flush=True)
    children: dict[int, float] = {}
    deaths: list[float] = []
    lifeline = os.pipe()  # never written: its end tells the workers that the parent is gone
    try:
        for _ in range(s.workers):
            if stopping:  # stopped while starting: no more workers
                break
            children[_fork(app, lifespans, sock, strict, legacy_only, old, lifeline)] = time.monotonic()
        while children and not stopping:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                time.sleep(0.1)
                continue
            children.pop(pid, None)
            if stopping:
                break
            now = time.monotonic()
            deaths = [t for t in deaths if now - t < RESTART_WINDOW_S] + [now]
            log.error("worker %d exited (%s); starting another", pid, _describe(status))
            if len(deaths) > MAX_RESTARTS:
                log.error("workers keep dying (%d in %.0f s); stopping", len(deaths), RESTART_WINDOW_S)
                stopping = True
                break
            children[_fork(app, lifespans, sock, strict, legacy_only, old, lifeline)] = now
        return _stop(children, s.shutdown_grace_s + 5)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        sock.close()
        for fd in lifeline:
            os.close(fd)


def _fork(app: App, lifespans: list[tuple[str, Any]], sock: Any, strict: bool, legacy_only: bool,
          handlers: dict[int, Any], lifeline: tuple[int, int]) -> int:
    # SIGTERM/SIGINT wait while the child still has the parent's handlers (which would swallow
    # a stop sent to it before it runs at all); it takes them once it has its own
    stops = {signal.SIGTERM, signal.SIGINT}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    pid = os.fork()
    if pid:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return pid
    code = 1
    try:
        os.close(lifeline[1])  # only the parent may hold the write end
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a stop that came meanwhile ends it now
        trio.run(lambda: serve_http(app, lifespans, strict=strict, legacy_only=legacy_only, sockets=[sock], announce=False,
                                    parent=lifeline[0]))
        code = 0
    except BaseException as exc:  # the worker's last word, then out
        log.error("worker %d failed: %s: %s", os.getpid(), type(exc).__name__, exc)
    finally:
        sys.stderr.flush()
        os._exit(code)


def _stop(children: dict[int, float], grace: float) -> int:
    for pid in children:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    code = 0
    while children and time.monotonic() < deadline:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            time.sleep(0.05)
            continue
        children.pop(pid, None)
        if os.waitstatus_to_exitcode(status) not in (0, -signal.SIGTERM):  # SIGTERM: stopped before it served
            code = 1
    for pid in children:
        log.error("worker %d did not stop in time; killing it", pid)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    return code


def _describe(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return f"signal {-code}" if code < 0 else f"exit {code}"

"""A real `mcpkit serve --transport http` on a loopback port, and a small HTTP client."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time
from typing import Any, Iterator

from .helpers import MCPKIT

INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "tests", "version": "0"}}
ACCEPT = "application/json, text/event-stream"


class HttpServer:
    host = "127.0.0.1"  # or ::1, when started with --host ::1

    def __init__(self, *args: str, env: dict[str, str] | None = None, exe: str = MCPKIT) -> None:
        self.proc = subprocess.Popen([exe, "serve", "--transport", "http", "--port", "0", *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env={**os.environ, **(env or {})}, start_new_session=True)
        self.stderr = b""
        found = threading.Event()
        self.port = 0

        def pump() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.stderr += line
                m = re.search(rb"serving MCP on https?://(127\.0\.0\.1|\[::1\]):(\d+)/mcp", line)
                if m:
                    self.host, self.port = m.group(1).decode().strip("[]"), int(m.group(2))
                    found.set()

        threading.Thread(target=pump, daemon=True).start()
        if not found.wait(30):
            self.proc.kill()
            raise RuntimeError(f"server did not start: {self.stderr.decode(errors='replace')}")

    def conn(self, timeout: float = 10) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
             raw: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
        c = self.conn()
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        hdrs = {"Content-Type": "application/json", "Accept": ACCEPT, **(headers or {})}
        c.request(method, path, body=data, headers=hdrs)
        resp = c.getresponse()
        out = resp.read()
        c.close()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, out

    def rpc(self, method: str, params: Any = None, *, session: str | None = None, headers: dict[str, str] | None = None,
            rid: Any = 1) -> tuple[int, dict[str, str], Any]:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if rid is not None:
            msg["id"] = rid
        if params is not None:
            msg["params"] = params
        hdrs = dict(headers or {})
        if session:
            hdrs["Mcp-Session-Id"] = session
            hdrs.setdefault("MCP-Protocol-Version", "2025-11-25")
        status, h, body = self.call("POST", "/mcp", msg, hdrs)
        if h.get("content-type", "").startswith("text/event-stream"):
            return status, h, [json.loads(d) for d in sse_data(body)]
        return status, h, json.loads(body) if body else None

    def initialize(self) -> str:
        status, h, reply = self.rpc("initialize", INIT)
        assert status == 200 and reply["result"]["protocolVersion"] == "2025-11-25"
        sid = h["mcp-session-id"]
        assert self.rpc("notifications/initialized", session=sid, rid=None)[0] == 202
        return sid

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def __enter__(self) -> "HttpServer":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        try:  # and its --workers, whatever state they are in (its own process group)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def sse_data(body: bytes) -> list[str]:
    """The data of each SSE event with data (comments and empty priming events skipped)."""
    out = []
    for block in body.decode().replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in block.split("\n") if line.startswith("data:"))
        if data:
            out.append(data)
    return out


def sse_events(resp: http.client.HTTPResponse) -> Iterator[dict[str, str]]:
    """Read SSE events one by one from a streaming response."""
    event: dict[str, str] = {}
    while True:
        line = resp.readline()
        if not line:
            return
        text = line.decode().rstrip("\r\n")
        if not text:
            if event:
                yield event
            event = {}
        elif not text.startswith(":"):
            key, _, value = text.partition(":")
            event[key] = event.get(key, "") + value.lstrip()


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    h = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if name is not None:
        h["Mcp-Name"] = name
    return h


def wait_until(cond: Any, timeout: float = 5) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False

"""The Redis leg of the campaign: the HTTP leg's hostile traffic, plus calls that use shared
state hard (streamed progress, change notices, tasks, GET streams, DELETE), against one
`mcpkit serve --transport http --state redis://...` while a real redis-server is driven
through the faults a real one has, in turn: refusing writes (OOM under maxmemory, READONLY as
a replica, MISCONF when it cannot save), stopped (SIGSTOP), and restarted empty.

Counted besides the HTTP leg's tallies: answers that leak internals (Redis's own words, our Lua
scripts, a traceback) — a failure like a 5xx other than 503.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable

from common import ROOT, Tally, server_env
from drive_http import ACCEPT, Server, Worker, drive
from generate import STATELESS

#: what no answer may contain (case-sensitive: hostile arguments echoed back are not these)
INTERNAL = (b"@user_script", b"script: ", b"OOM command", b"READONLY", b"MISCONF", b"read only replica", b"maxmemory",
            b"coredis", b"Traceback", b"ResponseError", b"ExecAbort")
FAULTS = ("oom", "readonly", "misconf", "stopped", "restart")


def _redis_server(work: Path) -> Any:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.scaleout_fixtures import RedisServer

    return RedisServer(work / "redis", persist=False)


class Faults:
    """Puts the redis-server through one fault after another, each followed by a healthy spell."""

    def __init__(self, redis: Any, spell: float) -> None:
        self.redis, self.spell = redis, spell
        self.seen: dict[str, int] = {}

    def _cli(self, *args: str) -> str:
        return str(self.redis.command(*args))

    def start(self, fault: str) -> Callable[[], None]:
        """Turn ``fault`` on; the function that turns it off."""
        r = self.redis
        if fault == "oom":
            self._cli("CONFIG", "SET", "maxmemory-policy", "noeviction")
            self._cli("CONFIG", "SET", "maxmemory", "1")
            return lambda: self._cli("CONFIG", "SET", "maxmemory", "0")
        if fault == "readonly":
            self._cli("REPLICAOF", "127.0.0.1", "1")  # nothing there: it stays a read-only replica
            return lambda: self._cli("REPLICAOF", "NO", "ONE")
        if fault == "misconf":
            if r.folder.exists():
                r.folder.rmdir()  # its working directory is gone: snapshots fail
            self._cli("CONFIG", "SET", "save", "3600 1")
            self._cli("BGSAVE")
            return lambda: self._cli("CONFIG", "SET", "save", "")
        if fault == "stopped":
            os.kill(r.proc.pid, signal.SIGSTOP)
            return lambda: os.kill(r.proc.pid, signal.SIGCONT)
        r.stop()  # restart: everything it held is gone

        def back() -> None:
            r.folder.mkdir(parents=True, exist_ok=True)
            r.start()

        return back

    def run(self, until: float) -> None:
        n = 0
        while time.monotonic() + 2 * self.spell < until:
            fault = FAULTS[n % len(FAULTS)]
            n += 1
            stop = self.start(fault)
            self.seen[fault] = self.seen.get(fault, 0) + 1
            try:
                time.sleep(self.spell)
            finally:
                stop()
            time.sleep(self.spell)


class RedisWorker(Worker):
    """A worker whose answers are also searched for internals, and who calls the tools that use
    shared state the most."""

    def record(self, status: int, headers: dict[str, str], data: bytes, path: str) -> None:
        super().record(status, headers, data, path)
        leaked = [word for word in INTERNAL if word in data]
        if leaked:
            self.tally.leaks += 1
            self.tally.note(f"leak {leaked} on {path} ({status}): {data[:200]!r}")

    def _session_call(self, message: dict[str, Any]) -> None:
        if self.session is None:
            self.in_session()  # initializes (or fails to, while Redis is away)
            return
        accept = ACCEPT if self.rng.random() < 0.5 else "text/event-stream, application/json"
        out = self.request("POST", "/mcp", json.dumps(message).encode(), {
            "Content-Type": "application/json", "Accept": accept, "Mcp-Session-Id": self.session,
            "MCP-Protocol-Version": "2025-11-25"})
        if out and out[0] == 404:
            self.session = None

    def shared_state_call(self) -> None:
        rid = self.corpus.next_id()
        roll = self.rng.random()
        if roll < 0.3:
            self._session_call({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
                "name": "ticker", "arguments": {"count": self.rng.randint(1, 4), "gap": 0.02},
                "_meta": {"progressToken": f"p{rid}"}}})
        elif roll < 0.5:
            self._session_call({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                                "params": {"name": "bump", "arguments": {"n": self.rng.randint(1, 9)}}})
        elif roll < 0.6:
            self._session_call({"jsonrpc": "2.0", "id": rid, "method": "resources/subscribe",
                                "params": {"uri": f"tick://{self.rng.randint(1, 9)}"}})
        elif roll < 0.7:
            self._session_call({"jsonrpc": "2.0", "id": rid, "method": "logging/setLevel",
                                "params": {"level": self.rng.choice(["debug", "info", "error"])}})
        elif roll < 0.85:
            meta = {"io.modelcontextprotocol/protocolVersion": STATELESS,
                    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
            name = self.rng.choice(["bump", "crunch", "where"])
            args = {"bump": {"n": 1}, "crunch": {"seconds": 0.2}, "where": {}}[name]
            self.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                                                     "params": {"name": name, "arguments": args, "_meta": meta}}).encode(),
                         {"Content-Type": "application/json", "Accept": ACCEPT, "MCP-Protocol-Version": STATELESS,
                          "Mcp-Method": "tools/call", "Mcp-Name": name})
        elif roll < 0.95 and self.session:
            self.dropped_stream("/mcp", f"Mcp-Session-Id: {self.session}\r\n".encode())
        elif self.session:
            self.request("DELETE", "/mcp", None, {"Mcp-Session-Id": self.session})
            self.session = None

    def step(self) -> None:
        if self.rng.random() < 0.6:
            self.shared_state_call()
            self.tally.sent += 1
        else:
            super().step()


def run_redis(seconds: float, seed: int, work: Path, workers: int = 4) -> Tally:
    tally = Tally("redis")
    work.mkdir(parents=True, exist_ok=True)
    redis = _redis_server(work)
    env = server_env(work)
    from tests.scaleout_plugin import plugin_env

    env["PYTHONPATH"] = os.pathsep.join((plugin_env(work / "scaleout")["PYTHONPATH"], env["PYTHONPATH"]))
    env["MCPKIT_STATE_TIMEOUT_S"] = "1"
    env["MCPKIT_SESSION_TTL_S"] = "20"
    plugins = ["--plugin", "scaleout", "--plugin", "hostile", "--plugin", "conformance"]
    server = Server(env, work / "redis-stderr.log", tally, ["--state", redis.url, *plugins])
    faults = Faults(redis, max(0.5, min(3.0, seconds / 12)))
    try:
        drive(server, tally, seconds, seed, workers, RedisWorker, (faults.run,))
        tally.faults = dict(faults.seen)
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
        if redis.proc is not None and redis.proc.poll() is None:
            os.kill(redis.proc.pid, signal.SIGCONT)
            redis.command("CONFIG", "SET", "save", "")
        redis.stop()
    return tally

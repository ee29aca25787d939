"""What a session per call costs the server, against one stateless call, in one run.

    make bench-session   (or .venv/bin/python bench/bench_session_cost.py [--seconds 4] [--rounds 3]
                          [--conns 4] [--states memory,redis] [--redis-unix] [--json FILE])

Kinds of work, measured side by side in alternating rounds on the same server:
  * stateless   one 2026-07-28 POST of ``tools/call`` (greet, the hello plugin) with its ``_meta``
                envelope and the Mcp-Method / Mcp-Name headers;
  * lifecycle   a handshake-era session per call: ``initialize`` → ``notifications/initialized``
                → ``tools/call`` → ``DELETE``, four HTTP exchanges on one keep-alive connection;
  * open-close  ``initialize`` → ``DELETE`` alone (what a session adds, in the issue's words);
  * bare        four exchanges the server refuses at once (``DELETE`` without a session id: 400):
                the floor of four exchanges on this machine (system calls, HTTP parsing).
Servers: `mcpkit serve --transport http --plugin hello` with memory state and with Redis state
(``--state redis://…``, a real redis-server on loopback), one process each. ``--conns`` clients
(asyncio + httptools, each on its own keep-alive connection) keep the server busy.

Measured: server CPU (user + system, from /proc over the server's process tree) per stateless
call and per session lifecycle, and their ratio (issue 27's goal: a lifecycle within 1.5× a
stateless call); Redis's own CPU per unit apart; operations per second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
from bench_http import Server, cpu_seconds, free_port
from io_load import Connection
from io_proc import tree_cpu

ACCEPT = b"application/json, text/event-stream"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"}}
CALL = {"name": "greet", "arguments": {"name": "bench"}}
STATELESS = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**CALL, "_meta": META}})
INIT = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
INITIALIZED = msgspec.json.encode({"jsonrpc": "2.0", "method": "notifications/initialized"})
SESSION_CALL = msgspec.json.encode({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": CALL})


class Redis:
    def __init__(self, folder: str, unix: bool = False) -> None:
        """On a loopback TCP port; with ``unix``, reached through a Unix socket instead."""
        self.port = free_port()
        sock = os.path.join(folder, "redis.sock")
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", folder, *(["--unixsocket", sock] if unix else [])],
                                     stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        self.url = f"unix://{sock}?db=0" if unix else f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class StateServer(Server):
    def __init__(self, state: str, redis: Redis | None, code: str | None = None) -> None:
        """``code``: a folder holding another version's ``mcpkit`` package, served instead of
        this one (a before/after comparison in one run)."""
        self.extra = ["--state", redis.url if redis is not None else "memory"]
        saved = os.environ.get("PYTHONPATH", "")
        if code:  # its own keys and bus in the shared redis-server
            os.environ.update(PYTHONPATH=os.pathsep.join(filter(None, [code, saved])), MCPKIT_STATE_PREFIX="before")
        try:
            super().__init__("mcpkit")
        finally:
            os.environ["PYTHONPATH"] = saved
            os.environ.pop("MCPKIT_STATE_PREFIX", None)
        self.kind = state


class Client:
    """One keep-alive connection doing one kind of work in a loop."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn: Connection | None = None

    async def send(self, method: bytes, body: bytes, extra: bytes = b"") -> tuple[int, str | None, bytes]:
        loop = asyncio.get_running_loop()
        if self.conn is None or self.conn.transport is None:
            _, self.conn = await loop.create_connection(Connection, "127.0.0.1", self.port)
        conn = self.conn
        conn.body, conn.sid = [], None
        conn.waiter = loop.create_future()
        head = b"%s /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n%s" % (method, extra)
        if body:
            head += b"Content-Type: application/json\r\nAccept: %s\r\nContent-Length: %d\r\n" % (ACCEPT, len(body))
        assert conn.transport is not None
        conn.transport.write(head + b"\r\n" + body)
        return await asyncio.wait_for(conn.waiter, 30)

    async def stateless(self) -> None:
        status, _, body = await self.send(b"POST", STATELESS, b"MCP-Protocol-Version: 2026-07-28\r\n"
                                          b"Mcp-Method: tools/call\r\nMcp-Name: greet\r\n")
        assert status == 200 and b"Hello, bench." in body, (status, body[:200])

    async def lifecycle(self) -> None:
        status, sid, body = await self.send(b"POST", INIT)
        assert status == 200 and sid, (status, body[:200])
        h = b"Mcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-11-25\r\n" % sid.encode()
        status, _, _ = await self.send(b"POST", INITIALIZED, h)
        assert status == 202, status
        status, _, body = await self.send(b"POST", SESSION_CALL, h)
        assert status == 200 and b"Hello, bench." in body, (status, body[:200])
        status, _, _ = await self.send(b"DELETE", b"", h)
        assert status == 200, status

    async def open_close(self) -> None:
        status, sid, body = await self.send(b"POST", INIT)
        assert status == 200 and sid, (status, body[:200])
        status, _, _ = await self.send(b"DELETE", b"", b"Mcp-Session-Id: %s\r\n" % sid.encode())
        assert status == 200, status

    async def bare(self) -> None:
        for _ in range(4):  # as many exchanges as a lifecycle, each refused at once (no session id: 400)
            status, _, _ = await self.send(b"DELETE", b"")
            assert status == 400, status


async def drive(port: int, kind: str, conns: int, seconds: float) -> int:
    done = 0
    deadline = time.monotonic() + seconds

    async def loop(client: Client) -> None:
        nonlocal done
        work = getattr(client, kind.replace("-", "_"))
        while time.monotonic() < deadline:
            await work()
            done += 1
        if client.conn is not None and client.conn.transport is not None:
            client.conn.transport.close()

    await asyncio.gather(*(loop(Client(port)) for _ in range(conns)))
    return done


def measure(server: StateServer, redis: Redis | None, kind: str, conns: int, seconds: float) -> dict[str, float]:
    asyncio.run(drive(server.port, kind, conns, 0.5))  # warm: connections, caches
    cpu0, rcpu0, t0 = tree_cpu(server.proc.pid), cpu_seconds(redis.proc.pid) if redis else 0.0, time.monotonic()
    n = asyncio.run(drive(server.port, kind, conns, seconds))
    cpu1, rcpu1, t1 = tree_cpu(server.proc.pid), cpu_seconds(redis.proc.pid) if redis else 0.0, time.monotonic()
    return {"per_s": n / (t1 - t0), "cpu_us": (cpu1 - cpu0) / n * 1e6, "redis_us": (rcpu1 - rcpu0) / n * 1e6, "n": n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--states", default="memory,redis")
    ap.add_argument("--kinds", default="stateless,lifecycle,open-close,bare",
                    help="stateless, lifecycle, open-close (initialize + DELETE), bare (4 exchanges refused at once)")
    ap.add_argument("--json", help="write the raw figures here")
    ap.add_argument("--redis-unix", action="store_true", help="reach redis-server through a Unix socket, not TCP")
    ap.add_argument("--before", help="also serve the mcpkit package in this folder (e.g. `git archive REV mcpkit | "
                                     "tar -x -C DIR`), as states memory@before and redis@before")
    args = ap.parse_args()
    states = args.states.split(",")
    if "redis" in states and not shutil.which("redis-server"):
        sys.exit("redis-server is not installed (make test-tools)")
    folder = tempfile.mkdtemp(prefix="bench-session-")
    redis = Redis(folder, args.redis_unix) if "redis" in states else None
    servers = {s: StateServer(s, redis if s == "redis" else None) for s in states}
    if args.before:
        for s in list(states):
            servers[f"{s}@before"] = StateServer(s, redis if s == "redis" else None, args.before)
            states.append(f"{s}@before")
    kinds = args.kinds.split(",")
    raw: dict[str, dict[str, list[dict[str, float]]]] = {s: {k: [] for k in kinds} for s in states}
    try:
        for r in range(args.rounds):
            for s in states:
                for kind in kinds if r % 2 == 0 else kinds[::-1]:
                    out = measure(servers[s], redis if s.startswith("redis") else None, kind, args.conns, args.seconds)
                    raw[s][kind].append(out)
                    print(f"round {r + 1} {s:6} {kind:10} {out['per_s']:8,.0f}/s  {out['cpu_us']:6.0f} µs CPU"
                          + (f"  redis {out['redis_us']:.0f} µs" if s.startswith("redis") else ""), flush=True)
    finally:
        for srv in servers.values():
            srv.stop()
        if redis is not None:
            redis.stop()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"\n{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; {args.rounds} rounds of {args.seconds:g} s, "
          f"{args.conns} connections{', Redis on a Unix socket' if args.redis_unix else ''}; server CPU µs per unit, medians, × a stateless call (per-round ratios)\n")
    print("| state | " + " | ".join(kinds) + " | Redis CPU µs per unit |")
    print("|---|" + "---|" * len(kinds) + "---|")
    med = lambda rows, k: statistics.median(x[k] for x in rows)  # noqa: E731
    for s in states:
        cells = []
        for kind in kinds:
            rows = raw[s][kind]
            cell = f"{med(rows, 'cpu_us'):.0f}"
            if kind != "stateless" and "stateless" in kinds:
                ratios = [b["cpu_us"] / a["cpu_us"] for a, b in zip(raw[s]["stateless"], rows)]
                cell += f" = **{statistics.median(ratios):.2f}×** ({' '.join(f'{x:.2f}' for x in ratios)})"
            cells.append(cell)
        redis_col = " / ".join(f"{med(raw[s][k], 'redis_us'):.0f}" for k in kinds) if s.startswith("redis") else "–"
        print(f"| {s} | " + " | ".join(cells) + f" | {redis_col} |")
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()

"""I/O-bound tools, a session per call: mcpkit against the official TypeScript and Python SDKs.

    make bench-io   (or .venv/bin/python bench/bench_io.py [--users 50] [--seconds 10] [--rounds 3]
                     [--servers mcpkit,mcpkit-httpx,ts-sdk,py-sdk] [--workers mcpkit=2,ts-sdk=2,...])

The public "MCP Server Performance Benchmark v2" workload, rebuilt on loopback: a product
catalogue API (bench/io_api.py) and a real redis-server, seeded as that benchmark seeds them;
three tools (search_products, get_user_cart, checkout) that call both, some calls at once; N
users each doing a session per call plus a tools/list session (bench/io_load.py). Servers:
  * mcpkit        `mcpkit serve --transport http --workers N`, the tools in bench/io_plugin.py
                  written as docs/writing-plugins.md recommends (mcpkit.http_client, coredis
                  with pipelining)
  * mcpkit-httpx  the same server, the tools on httpx and one awaited coredis call per command
  * mcpkit-fifo   mcpkit with the FIFO gate on (``active_requests = 8``: requests answered in
                  arrival order under saturation; not in the default set)
  * ts-sdk        the official TypeScript SDK + express, node:cluster (bench/ts/server.mjs)
  * py-sdk        the official Python SDK's MCPServer, stateless JSON, uvicorn + uvloop
                  (bench/io_sdk_server.py)
Each round measures every server back to back, in alternating order (this VM drifts): a
loaded window (N users, after a warm-up) and an unloaded one (1 user). Figures are medians of
the rounds, with their spread: mcp requests/s (initialize, tools/call and tools/list, as the
public benchmark counts them), server CPU per mcp request summed over the server's whole
process tree from /proc, latency per request kind (tool calls against requests that do no
I/O), RSS and PSS of the tree, and the API's and Redis's CPU beside them. Access logs are off
in every server.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import io_load
from bench_http import free_port, wait_port
from bench_io_report import report
from io_proc import Proc, tree_cpu, tree_memory

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
SERVERS = ("mcpkit", "mcpkit-httpx", "ts-sdk", "py-sdk")
KNOWN = (*SERVERS, "mcpkit-fifo")


def _resp(*args: str | int | float) -> bytes:
    parts = [str(a).encode() for a in args]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


def seed_redis(port: int) -> None:
    """The public benchmark's data: 10k carts, 1k histories of 20 orders, a 100k-member
    popularity set, 100 rate-limit counters."""
    out = [_resp("FLUSHDB")]
    for n in range(1, 10_001):
        items = [{"product_id": (n * 7) % 100_000 + 1, "qty": 1 + n % 3}, {"product_id": (n * 13) % 100_000 + 1, "qty": 1 + n % 2}]
        if n % 3 == 0:
            items.append({"product_id": (n * 17) % 100_000 + 1, "qty": 1})
        total = sum(it["qty"] * (((it["product_id"] * 100) % 9_999) + 1) / 100.0 for it in items)
        out.append(_resp("HSET", f"bench:cart:user-{n:05d}", "user_id", f"user-{n:05d}", "items", json.dumps(items),
                         "created", "1740000000", "expires", "1740086400", "total", f"{total:.2f}"))
    for n in range(1, 1_001):
        entries = [json.dumps({"order_id": f"ORD-{n:05d}-{j:02d}", "product_id": (n * j * 7) % 100_000 + 1, "qty": 1 + j % 3,
                               "price": round(((n * j * 13) % 9_999 + 1) / 100.0, 2), "ts": 1_740_000_000 + n * 86_400 + j * 3_600})
                   for j in range(1, 21)]
        out.append(_resp("RPUSH", f"bench:history:user-{n:05d}", *entries))
    for start in range(1, 100_001, 5_000):
        pairs = [x for i in range(start, start + 5_000) for x in (i * 7 % 10_000, f"product:{i}")]
        out.append(_resp("ZADD", "bench:popular", *pairs))
    out += [_resp("SET", f"bench:ratelimit:user-{n:05d}", 0) for n in range(1, 101)]
    out.append(_resp("PING"))
    with socket.create_connection(("127.0.0.1", port), 10) as s:
        s.sendall(b"".join(out))
        got = b""
        while not got.endswith(b"+PONG\r\n"):
            data = s.recv(1 << 20)
            if not data:
                raise RuntimeError("redis closed the connection while seeding")
            got += data
        if b"\r\n-" in got or got.startswith(b"-"):
            raise RuntimeError(f"seeding redis failed: {got[:200]!r}")


def start_backends(folder: str) -> tuple[Proc, Proc]:
    rport, aport = free_port(), free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                              "--dir", folder], stdout=subprocess.DEVNULL)
    api = subprocess.Popen([sys.executable, str(HERE / "io_api.py"), str(aport)])
    wait_port(rport, "redis-server", redis, 60)
    wait_port(aport, "the catalogue API", api, 60)
    seed_redis(rport)
    return Proc("redis", redis, rport), Proc("api", api, aport)


def plugin_site(folder: str) -> str:
    """A folder that makes bench/io_plugin.py an installed plugin named ``benchio`` (the entry
    point is read from the dist-info, as for any installed distribution)."""
    site = Path(folder) / "site"
    info = site / "mcpkit_bench_io-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mcpkit-bench-io\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[mcpkit.plugins]\nbenchio = io_plugin\n")
    return os.pathsep.join([str(site), str(HERE)])


def start_server(kind: str, workers: int, redis: Proc, api: Proc, folder: str, site: str) -> Proc:
    port = free_port()
    api_url, redis_url = f"http://127.0.0.1:{api.port}", f"redis://127.0.0.1:{redis.port}/0"
    env = dict(os.environ, BENCH_API_URL=api_url, BENCH_REDIS_URL=redis_url)
    if kind.startswith("mcpkit"):
        cmd = [str(BIN / "mcpkit"), "serve", "--transport", "http", "--port", str(port), "--workers", str(workers),
               "--plugin", "benchio"]
        env.update(PYTHONPATH=os.pathsep.join(filter(None, [site, env.get("PYTHONPATH")])), MCPKIT_LOG_LEVEL="warning",
                   MCPKIT_MAX_CONNECTIONS="4096", MCPKIT_MAX_SESSIONS="4096", MCPKIT_PLUGIN__BENCHIO__API_URL=api_url,
                   MCPKIT_PLUGIN__BENCHIO__REDIS_URL=redis_url,
                   MCPKIT_PLUGIN__BENCHIO__CLIENT="httpx" if kind == "mcpkit-httpx" else "mcpkit")
        if kind == "mcpkit-fifo":
            env["MCPKIT_ACTIVE_REQUESTS"] = "8"
    elif kind == "ts-sdk":
        cmd = ["node", str(HERE / "ts" / "server.mjs"), str(port), str(workers)]
    elif kind == "py-sdk":
        cmd = [sys.executable, "-m", "uvicorn", "--app-dir", str(HERE), "io_sdk_server:app", "--host", "127.0.0.1",
               "--port", str(port), "--workers", str(workers), "--loop", "uvloop", "--http", "httptools",
               "--no-access-log", "--log-level", "warning"]
    else:
        raise SystemExit(f"unknown server {kind!r} (known: {', '.join(KNOWN)})")
    log = Path(folder) / f"{kind}.log"  # a file, not a pipe: a chatty server never blocks on it
    with log.open("wb") as sink:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=sink, env=env)
    server = Proc(kind, proc, port, log)
    try:
        wait_port(port, kind, proc, 60)
        check_server(server)
    except BaseException:
        server.stop()
        raise
    return server


def check_server(server: Proc) -> None:
    """Every kind of session once, answers checked, before anything is measured (a server
    that is still starting its workers gets a few seconds)."""
    end = time.monotonic() + 30
    while True:
        stats = io_load.run(server.port, 1, 0.0, 0.4, lambda start: None, think=0.0)
        if stats.mcp_requests and not stats.errors:
            return
        if time.monotonic() > end:
            tail = server.log.read_bytes()[-3000:].decode(errors="replace") if server.log else ""
            raise RuntimeError(f"{server.kind} answers wrongly: errors {stats.errors} after {stats.mcp_requests} requests\n{tail}")
        time.sleep(1)


def window(server: Proc, redis: Proc, api: Proc, users: int, warm: float, seconds: float) -> dict[str, Any]:
    marks: dict[str, float] = {}

    def mark(start: bool) -> None:
        tag = "0" if start else "1"
        marks["t" + tag] = time.perf_counter()
        marks["cpu" + tag] = tree_cpu(server.pid)
        marks["redis" + tag], marks["api" + tag] = tree_cpu(redis.pid), tree_cpu(api.pid)
        if not start:
            marks["rss"], marks["pss"] = tree_memory(server.pid)

    load = os.getloadavg()[0]
    stats = io_load.run(server.port, users, warm, seconds, mark)
    elapsed, n = marks["t1"] - marks["t0"], max(stats.mcp_requests, 1)
    return {"rps": stats.mcp_requests / elapsed, "cpu_us": (marks["cpu1"] - marks["cpu0"]) / n * 1e6,
            "redis_us": (marks["redis1"] - marks["redis0"]) / n * 1e6, "api_us": (marks["api1"] - marks["api0"]) / n * 1e6,
            "rss_mib": marks["rss"], "pss_mib": marks["pss"], "load": load, "mcp_requests": stats.mcp_requests,
            "http_requests": stats.http_requests, "errors": stats.errors,
            "latency_ms": {k: [round(v * 1000, 3) for v in vs] for k, vs in stats.latencies.items()}}


def summarize(raw: dict[str, Any]) -> dict[str, Any]:
    """Percentiles per request kind instead of every latency (what --json keeps)."""
    lat = raw.pop("latency_ms")
    tools = [v for k, vs in lat.items() if k in ("search_products", "get_user_cart", "checkout") for v in vs]
    no_io = [v for k, vs in lat.items() if k in ("initialize", "tools/list") for v in vs]
    groups = {**lat, "tool calls": tools, "no-I/O (initialize, tools/list)": no_io}
    raw["latency"] = {k: {"p50": pct(vs, 50), "p99": pct(vs, 99), "n": len(vs)} for k, vs in groups.items() if vs}
    return raw


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))] if ordered else float("nan")


def parse_workers(text: str, kinds: list[str], default: int) -> dict[str, int]:
    out = {k: default for k in kinds}
    for part in filter(None, text.split(",")):
        name, _, n = part.partition("=")
        out[name] = int(n)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=10, help="measured seconds per loaded window")
    ap.add_argument("--warm", type=float, default=2, help="unmeasured seconds before each window")
    ap.add_argument("--unloaded-seconds", type=float, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--workers", default="", help="per server, e.g. mcpkit=2,ts-sdk=4 (default 2 each)")
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--chart", type=Path, default=HERE.parent / "docs" / "benchmarks-io.svg")
    ap.add_argument("--replot", type=Path, metavar="JSON", help="report and chart again from a --json file")
    args = ap.parse_args()
    if args.replot:
        report(json.loads(args.replot.read_text()), args.chart)
        return
    kinds = [k for k in args.servers.split(",") if k]
    workers = parse_workers(args.workers, kinds, 2)
    for tool, why in (("redis-server", "the Debian package redis-server"), ("node", "Node.js (for ts-sdk)")):
        if shutil.which(tool) is None and (tool != "node" or "ts-sdk" in kinds):
            sys.exit(f"bench_io needs {tool}: {why} (`make bench-io` installs what it can)")
    if "ts-sdk" in kinds and not (HERE / "ts" / "node_modules" / "@modelcontextprotocol").is_dir():
        sys.exit("bench_io needs the TypeScript SDK: run `make bench-io` (npm install in bench/ts)")
    folder = tempfile.mkdtemp(prefix="bench-io-")
    redis, api = start_backends(folder)
    servers: dict[str, Proc] = {}
    rounds: list[dict[str, Any]] = []
    try:
        site = plugin_site(folder)
        for kind in kinds:
            servers[kind] = start_server(kind, workers[kind], redis, api, folder, site)
        for rnd in range(args.rounds):
            order = kinds if rnd % 2 == 0 else kinds[::-1]
            this: dict[str, Any] = {}
            for kind in order:
                s = servers[kind]
                loaded = summarize(window(s, redis, api, args.users, args.warm, args.seconds))
                alone = summarize(window(s, redis, api, 1, 0.5, args.unloaded_seconds))
                this[kind] = {"loaded": loaded, "unloaded": alone}
            rounds.append(this)
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        for s in servers.values():
            s.stop()
        api.stop()
        redis.stop()
        shutil.rmtree(folder, ignore_errors=True)
    result = {"users": args.users, "seconds": args.seconds, "rounds": rounds, "workers": workers,
              "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M")}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    report(result, args.chart)


if __name__ == "__main__":
    main()

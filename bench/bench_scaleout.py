"""Scale-out benchmark: tools/call with `state = "memory"` against `state = "redis://..."`, on
1, 2 and 4 worker processes, in one run.

    make bench-scaleout   (or .venv/bin/python bench/bench_scaleout.py [--seconds 5] [--rounds 3] [--conns 16])

Every configuration is started once (`mcpkit serve --transport http --workers N`, mcpkit's own
server, one listening socket shared by the workers) and measured in alternating rounds with
wrk on keep-alive connections; figures are medians over the rounds. Two eras:
  * stateless (2026-07-28): no session; nothing is shared per request.
  * handshake era, one session opened before the run: with Redis, a worker that has not seen the
    session loads it once, then serves it from its cache; the idle expiry is pushed back at most
    every few seconds. Memory state needs one process here (sessions are per process).
CPU per call counts every worker and, for Redis, the redis-server process too (shown apart).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_http import Server, cpu_seconds, free_port, run_wrk

CONFIGS = {"stateless": ["memory×1", "memory×2", "memory×4", "redis×1", "redis×2", "redis×4"],
           "session": ["memory×1", "redis×1", "redis×2", "redis×4"]}


class Redis:
    def __init__(self, folder: str) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", folder], stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class Workers(Server):
    """`mcpkit serve --workers N` with the given state (bench_http's Server, other arguments)."""

    def __init__(self, name: str, redis: Redis) -> None:
        state, n = name.split("×")
        self.extra = ["--workers", n, "--state", redis.url if state == "redis" else "memory"]
        super().__init__("mcpkit")
        self.kind = name

    def pids(self) -> list[int]:
        out = [self.proc.pid]
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        if children.exists():
            out += [int(p) for p in children.read_text().split()]
        return out


def total_cpu(pids: list[int]) -> float:
    return sum(cpu_seconds(p) for p in pids if Path(f"/proc/{p}").exists())


def measure(server: Workers, redis: Redis, request: tuple[dict[str, str], dict], conns: int, seconds: float) -> dict[str, float]:
    pids = server.pids()
    cpu0, rcpu0 = total_cpu(pids), cpu_seconds(redis.proc.pid)
    result = run_wrk(server, *request, conns, seconds)
    calls = result["rps"] * max(1, round(seconds))
    result["cpu_us"] = (total_cpu(pids) - cpu0) / calls * 1e6
    result["redis_cpu_us"] = (cpu_seconds(redis.proc.pid) - rcpu0) / calls * 1e6
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conns", type=int, default=16)
    args = ap.parse_args()
    for tool in ("wrk", "redis-server"):
        if shutil.which(tool) is None:
            sys.exit(f"bench_scaleout needs {tool} (`make bench-scaleout` installs it)")
    folder = tempfile.mkdtemp()
    redis = Redis(folder)
    servers = {name: Workers(name, redis) for name in sorted({n for ns in CONFIGS.values() for n in ns})}
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    try:
        time.sleep(1)  # the workers have forked
        requests = {(era, n): servers[n].request(era) for era, ns in CONFIGS.items() for n in ns}
        for era, ns in CONFIGS.items():  # warm-up: every worker sees the session once
            for n in ns:
                run_wrk(servers[n], *requests[(era, n)], args.conns, 1)
        for rnd in range(args.rounds):
            for era, ns in CONFIGS.items():
                for n in ns:
                    results.setdefault((era, n), []).append(measure(servers[n], redis, requests[(era, n)], args.conns, args.seconds))
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        for s in servers.values():
            s.stop()
        redis.stop()
    print(f"machine: {os.cpu_count()} CPUs; wrk -c{args.conns}, {args.seconds:g} s per run, {args.rounds} alternating rounds, medians")
    for era, ns in CONFIGS.items():
        print(f"\n{'2026-07-28 stateless' if era == 'stateless' else 'handshake era, one session'}")
        print("| state × processes | req/s | CPU µs/call (workers) | Redis CPU µs/call | p50 ms | p99 ms |\n|---|---|---|---|---|---|")
        for n in ns:
            m = {k: statistics.median(r[k] for r in results[(era, n)]) for k in results[(era, n)][0]}
            print(f"| {n} | {m['rps']:,.0f} | {m['cpu_us']:.0f} | {m['redis_cpu_us']:.1f} | {m['p50_ms']:.2f} | {m['p99_ms']:.2f} |")


if __name__ == "__main__":
    main()

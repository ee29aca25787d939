"""CPU per Redis command on trio with coredis, and what the recipe in docs/writing-plugins.md saves.

    .venv/bin/python bench/bench_redis_client.py [--commands N] [--rounds R]

A local redis-server; the same commands in alternating rounds, CPU of this process per
command (Redis's own is not counted), medians of the rounds with their spread:
  * coredis as installed (environment read on every command)
  * coredis through mcpkit.redis_client (the environment read once)
  * the same with coredis.Config.optimized = True (coredis's own switch: no argument checks)
  * three commands at once as three tasks, against the same three in one pipeline
  * the floor: a bare trio socket sending GET and reading the reply
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import coredis
import trio

from bench_http import free_port
from mcpkit.server.redis_client import redis_client


async def timed(fn: Any, n: int) -> float:
    for _ in range(100):
        await fn()
    t0 = time.process_time()
    for _ in range(n):
        await fn()
    return (time.process_time() - t0) / n * 1e6


async def case(name: str, url: str, n: int) -> float:
    if name == "floor":
        sock = trio.socket.socket()
        await sock.connect(("127.0.0.1", int(url.rsplit(":", 1)[1].split("/")[0])))
        cmd = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"

        async def bare() -> None:
            await sock.send(cmd)
            await sock.recv(65536)
        try:
            return await timed(bare, n)
        finally:
            sock.close()
    client = coredis.Redis.from_url(url, decode_responses=True) if name == "coredis" else redis_client(url)
    coredis.Config.optimized = name == "optimized"
    async with client:
        await client.set("k", "v")
        if name == "3 tasks":
            async def incr() -> None:
                await client.incr("c")

            async def three() -> None:
                async with trio.open_nursery() as nursery:
                    for _ in range(3):
                        nursery.start_soon(incr)
            return await timed(three, n // 3)
        if name == "3 in a pipeline":
            async def piped() -> None:
                async with client.pipeline(transaction=False) as pipe:
                    for _ in range(3):
                        pipe.incr("c")
            return await timed(piped, n // 3)
        return await timed(lambda: client.get("k"), n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commands", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    port = free_port()
    folder = tempfile.mkdtemp()
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                              "--dir", folder], stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    url = f"redis://127.0.0.1:{port}/0"
    cases = ["coredis", "redis_client", "optimized", "3 tasks", "3 in a pipeline", "floor"]
    results: dict[str, list[float]] = {c: [] for c in cases}
    try:
        for rnd in range(args.rounds):
            for name in cases if rnd % 2 == 0 else cases[::-1]:
                results[name].append(trio.run(case, name, url, args.commands))
    finally:
        redis.terminate()
        redis.wait(10)
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; {args.commands} commands, {args.rounds} "
          "alternating rounds; CPU µs in this process, median (min–max)")
    print("| case | per | CPU µs |\n|---|---|---|")
    for name in cases:
        per = "3 commands" if name.startswith("3") else "command"
        r = results[name]
        print(f"| {name} | {per} | {statistics.median(r):.0f} ({min(r):.0f}–{max(r):.0f}) |")


if __name__ == "__main__":
    sys.exit(main())

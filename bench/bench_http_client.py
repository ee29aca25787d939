"""CPU per HTTP call on trio: mcpkit's client (mcpkit.http_client) against httpx, in one run.

    .venv/bin/python bench/bench_http_client.py [--calls N] [--rounds R] [--concurrency C]

A local JSON API (bench/io_api.py, another process) answers; each client makes the same calls
in alternating rounds (the VM's speed drifts, so every round measures every client back to
back): a GET of one product (~300 bytes of JSON) and a POST of a cart (JSON both ways), one
after another, then C at a time from C tasks. CPU is this process's user+system time per call
(the API's is not counted); the figures are medians of the rounds with their spread. The
issue's bar for writing our own client: at most 1/3 of httpx's CPU per call.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import httpx
import trio

from bench_http import free_port
from mcpkit.httpclient import http_client

HERE = Path(__file__).resolve().parent
CART = {"user_id": "user-00042", "items": [{"product_id": 42, "quantity": 2}, {"product_id": 1337, "quantity": 1}]}


def make_clients(base: str, concurrency: int) -> dict[str, Callable[[], Any]]:
    limits = max(concurrency, 10)
    return {
        "httpx": lambda: httpx.AsyncClient(base_url=base, timeout=10.0),
        "httpx-tuned": lambda: httpx.AsyncClient(base_url=base, timeout=10.0, trust_env=False,
                                                 limits=httpx.Limits(max_connections=100, max_keepalive_connections=limits),
                                                 headers={"Accept-Encoding": "identity"}),
        "mcpkit": lambda: http_client(base, timeout=10.0, max_keepalive=limits),
    }


async def one_kind(client: Any, kind: str) -> None:
    if kind == "get":
        r = await client.get("/products/42")
    else:
        r = await client.post("/cart/calculate", json=CART)
    r.raise_for_status()
    assert r.json()["id" if kind == "get" else "items_count"] in (42, 2)


async def measure(make: Callable[[], Any], kind: str, calls: int, concurrency: int) -> float:
    async with make() as client:
        for _ in range(50):  # connections open, code warm
            await one_kind(client, kind)
        per_task = calls // concurrency

        async def worker() -> None:
            for _ in range(per_task):
                await one_kind(client, kind)

        t0 = time.process_time()
        if concurrency == 1:
            await worker()
        else:
            async with trio.open_nursery() as nursery:
                for _ in range(concurrency):
                    nursery.start_soon(worker)
        return (time.process_time() - t0) / (per_task * concurrency) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=10)
    args = ap.parse_args()
    port = free_port()
    api = subprocess.Popen([sys.executable, str(HERE / "io_api.py"), str(port)])
    try:
        end = time.monotonic() + 20
        while time.monotonic() < end:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        clients = make_clients(f"http://127.0.0.1:{port}", args.concurrency)
        cases = [(kind, c) for kind in ("get", "post") for c in (1, args.concurrency)]
        results: dict[tuple[str, str, int], list[float]] = {}
        for rnd in range(args.rounds):
            names = list(clients) if rnd % 2 == 0 else list(reversed(clients))
            for kind, conc in cases:
                for name in names:
                    us = trio.run(measure, clients[name], kind, args.calls, conc)
                    results.setdefault((name, kind, conc), []).append(us)
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        api.terminate()
        api.wait(10)
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; {args.calls} calls per case, "
          f"{args.rounds} alternating rounds; CPU µs per call in the calling process, median (min–max)")
    print("| call | tasks | " + " | ".join(clients) + " | mcpkit / httpx |")
    print("|---|---|" + "---|" * (len(clients) + 1))
    for kind, conc in cases:
        cells = []
        for name in clients:
            runs = results[(name, kind, conc)]
            cells.append(f"{statistics.median(runs):.0f} ({min(runs):.0f}–{max(runs):.0f})")
        ratios = [m / h for m, h in zip(results[("mcpkit", kind, conc)], results[("httpx", kind, conc)])]
        print(f"| {kind.upper()} | {conc} | " + " | ".join(cells) + f" | **{statistics.median(ratios):.2f}** "
              f"({min(ratios):.2f}–{max(ratios):.2f}) |")


if __name__ == "__main__":
    main()

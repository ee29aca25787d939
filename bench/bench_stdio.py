"""stdio benchmark: mcpkit vs the official SDK's MCPServer, side by side in one run.

Measures, for each server, over a real subprocess and pipes:
  * server CPU time per tools/call (user+sys of the server process, from /proc),
  * cold start: spawn to the answer of the first tools/list (initialize handshake first),
  * resident memory (VmRSS) after N calls.
Run: `make bench` or `.venv/bin/python bench/bench_stdio.py [--calls N] [--starts K]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
SERVERS = {
    "mcpkit": [str(BIN / "mcpkit"), "serve", "--plugin", "hello"],
    "sdk": [sys.executable, str(HERE / "sdk_server.py")],
}
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Proc:
    def __init__(self, cmd: list[str]) -> None:
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.n = 0

    def call(self, method: str, params: dict | None = None) -> dict:
        self.n += 1
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method, **({"params": params} if params is not None else {})}
        assert self.p.stdin and self.p.stdout
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()
        while True:
            reply = json.loads(self.p.stdout.readline())
            if reply.get("id") == self.n:
                return reply

    def notify(self, method: str) -> None:
        assert self.p.stdin
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.p.stdin.flush()

    def handshake(self) -> None:
        self.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}})
        self.notify("notifications/initialized")

    def close(self) -> None:
        assert self.p.stdin
        self.p.stdin.close()
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()


def cold_start(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    proc = Proc(cmd)
    proc.handshake()
    tools = proc.call("tools/list")
    elapsed = time.perf_counter() - t0
    assert tools["result"]["tools"], tools
    proc.close()
    return elapsed


def per_call(cmd: list[str], calls: int) -> tuple[float, float, float]:
    proc = Proc(cmd)
    proc.handshake()
    for _ in range(200):  # warm-up
        proc.call("tools/call", {"name": "greet", "arguments": {"name": "bench"}})
    cpu0, t0 = cpu_seconds(proc.p.pid), time.perf_counter()
    for _ in range(calls):
        reply = proc.call("tools/call", {"name": "greet", "arguments": {"name": "bench"}})
    wall = time.perf_counter() - t0
    cpu = cpu_seconds(proc.p.pid) - cpu0
    assert reply["result"]["content"][0]["text"] == "Hello, bench.", reply
    rss = rss_mib(proc.p.pid)
    proc.close()
    return cpu / calls * 1e6, wall / calls * 1e6, rss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--starts", type=int, default=7)
    args = ap.parse_args()
    rows = {}
    for name, cmd in SERVERS.items():
        starts = sorted(cold_start(cmd) for _ in range(args.starts))
        cpu_us, wall_us, rss = per_call(cmd, args.calls)
        rows[name] = {"cold_start_s": statistics.median(starts), "cpu_us_per_call": cpu_us, "wall_us_per_call": wall_us, "rss_mib": rss}
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; {args.calls} sequential tools/call, median of {args.starts} cold starts")
    print(f"{'':28}{'mcpkit':>12}{'sdk':>12}{'ratio':>10}")
    for key, label in (("cpu_us_per_call", "server CPU per call (us)"), ("wall_us_per_call", "round trip per call (us)"),
                       ("cold_start_s", "cold start to tools/list (s)"), ("rss_mib", f"RSS after {args.calls} calls (MiB)")):
        a, b = rows["mcpkit"][key], rows["sdk"][key]
        print(f"{label:28}{a:12.3f}{b:12.3f}{a / b:10.3f}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()

"""stdio benchmark: mcpkit vs the official SDK's MCPServer, side by side in one run.

Measures, for each server, over a real subprocess and pipes:
  * server CPU time per tools/call (user+sys of the server process, from /proc),
  * cold start: spawn to the answer of the first tools/list (initialize handshake first),
  * resident memory (VmRSS) after N calls.

The two servers are measured in alternating rounds (mcpkit first in odd rounds, the SDK first in
even ones), so a machine that speeds up or slows down during the run weighs on both alike; the
table shows medians over the rounds and the spread of the per-round ratios.

Placement: ``free`` lets the OS place the driver and the server (what an MCP host does);
``same-cpu`` pins both to one CPU, which takes out the cost of waking an idle CPU for every
message. On a virtual machine that wake-up is large and the same for every server, so it
compresses the ratios; ``both`` (the default) reports the two.

Run: `make bench` or `.venv/bin/python bench/bench_stdio.py [--calls N] [--rounds R]
[--starts K] [--placement free|same-cpu|both] [--no-floor]`. The trio floor rows show what a bare
trio + msgspec loop costs per call (bench/trio_floor_server.py), for scale.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = Path(sys.executable).parent
#: The hello plugin is a test fixture outside the venv (`make fixtures`): on the servers' path.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent / ".conformance" / "site"),
                                                         os.environ.get("PYTHONPATH")]))
SERVERS = {
    "mcpkit": [str(BIN / "mcpkit"), "serve", "--plugin", "hello"],
    "sdk": [sys.executable, str(HERE / "sdk_server.py")],
}
#: Reference rows, CPU per call only: a bare trio + msgspec loop (bench/trio_floor_server.py).
FLOORS = {f"trio floor, {mode}": [sys.executable, str(HERE / "trio_floor_server.py"), mode] for mode in ("inline", "task", "scoped")}
TICK = os.sysconf("SC_CLK_TCK")
CALL = {"name": "greet", "arguments": {"name": "bench"}}


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
    """Server CPU and round trip per call (µs) over ``calls`` sequential calls, and RSS after."""
    proc = Proc(cmd)
    proc.handshake()
    for _ in range(500):  # warm-up
        proc.call("tools/call", CALL)
    cpu0, t0 = cpu_seconds(proc.p.pid), time.perf_counter()
    for _ in range(calls):
        reply = proc.call("tools/call", CALL)
    wall = time.perf_counter() - t0
    cpu = cpu_seconds(proc.p.pid) - cpu0
    assert reply["result"]["content"][0]["text"] == "Hello, bench.", reply
    rss = rss_mib(proc.p.pid)
    proc.close()
    return cpu / calls * 1e6, wall / calls * 1e6, rss


def measure(placement: str, args: argparse.Namespace) -> dict:
    cpus = sorted(os.sched_getaffinity(0))
    if placement == "same-cpu":
        os.sched_setaffinity(0, {cpus[-1]})  # the servers inherit it
    try:
        every = {**SERVERS, **(FLOORS if args.floor else {})}
        samples: dict[str, dict[str, list[float]]] = {n: {"cpu": [], "wall": [], "rss": [], "start": []} for n in every}
        for rnd in range(args.rounds):
            order = list(SERVERS) if rnd % 2 == 0 else list(reversed(SERVERS))
            for name in order:
                for _ in range(args.starts):
                    samples[name]["start"].append(cold_start(SERVERS[name]))
            for name in order + [f for f in every if f not in SERVERS]:
                cpu_us, wall_us, rss = per_call(every[name], args.calls)
                for key, value in (("cpu", cpu_us), ("wall", wall_us), ("rss", rss)):
                    samples[name][key].append(value)
    finally:
        os.sched_setaffinity(0, cpus)
    return samples


def report(placement: str, samples: dict, args: argparse.Namespace) -> dict:
    med = {n: {k: statistics.median(v) for k, v in s.items() if v} for n, s in samples.items()}
    print(f"\nplacement: {placement}; {args.rounds} alternating rounds of {args.calls} sequential tools/call "
          f"(medians over rounds) and {args.starts} cold starts per round (median of {args.rounds * args.starts})")
    print(f"{'':30}{'mcpkit':>11}{'sdk':>11}{'ratio':>8}   per-round ratios")
    rows = (("cpu", "server CPU per call (µs)"), ("wall", "round trip per call (µs)"),
            ("start", "cold start to tools/list (s)"), ("rss", f"RSS after {args.calls} calls (MiB)"))
    for key, label in rows:
        a, b = med["mcpkit"][key], med["sdk"][key]
        per_round = ""
        if key in ("cpu", "rss"):
            per_round = " ".join(f"{x / y:.3f}" for x, y in zip(samples["mcpkit"][key], samples["sdk"][key]))
        print(f"{label:30}{a:11.3f}{b:11.3f}{a / b:8.3f}   {per_round}")
    for name in (n for n in samples if n not in SERVERS):
        a, b = med[name]["cpu"], med["sdk"]["cpu"]
        print(f"{name + ' CPU/call (µs)':30}{a:11.3f}{b:11.3f}{a / b:8.3f}")
    return med


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--starts", type=int, default=3, help="cold starts per server per round")
    ap.add_argument("--placement", choices=["free", "same-cpu", "both"], default="both")
    ap.add_argument("--no-floor", dest="floor", action="store_false", help="skip the bare trio reference loops")
    args = ap.parse_args()
    # The SDK's files were byte-compiled when pip installed them; give mcpkit's the same footing
    # (a checkout run with PYTHONDONTWRITEBYTECODE would otherwise compile them at every start).
    for folder in ("mcpkit", "plugins", "examples/hello-plugin"):
        compileall.compile_dir(str(ROOT / folder), quiet=2)
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d %H:%M')}")
    placements = ["free", "same-cpu"] if args.placement == "both" else [args.placement]
    print(json.dumps({p: report(p, measure(p, args), args) for p in placements}))


if __name__ == "__main__":
    main()

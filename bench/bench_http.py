"""HTTP benchmark: tools/call over Streamable HTTP, mcpkit against the official SDK, in one run.

    make bench-http      (or .venv/bin/python bench/bench_http.py [--seconds 5] [--rounds 3] [--conns 1,8,64] [--pin S[,L]])

Servers, all started once and measured in alternating rounds (this VM drifts by tens of
percent within minutes, so every round measures every server back to back):
  * mcpkit          `mcpkit serve --transport http` on mcpkit's own HTTP/1.1 server
  * mcpkit-hypercorn the same app on hypercorn (`--server hypercorn`)
  * sdk-stateless   the SDK (uvicorn) with stateless_http=True, json_response=True
  * sdk-stateful    the SDK's default: sessions, SSE-framed answers
  * floor           bench/http_floor_server.py: a bare trio + httptools loop that msgspec-decodes
                    the request and answers a fixed tools/call result (stateless rows only): what
                    is left of mcpkit's CPU above it is its own
Two eras: 2026-07-28 stateless requests (mcpkit and sdk-stateless) and the handshake era with a
session (mcpkit and sdk-stateful). wrk drives keep-alive connections (1, 8, 64); figures are
medians over the rounds: requests/s, server CPU per request (from /proc), p50 and p99 latency.
Then 1,000 idle SSE streams per server, and the server's RSS growth for holding them.
A chart (docs/benchmarks-http.svg) shows requests/s and CPU per request per server and era.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chart import bar_chart

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
#: The hello plugin is a test fixture outside the venv (`make fixtures`): on the servers' path.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent / ".conformance" / "site"),
                                                         os.environ.get("PYTHONPATH")]))
TICK = os.sysconf("SC_CLK_TCK")
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"}}
CALL = {"name": "greet", "arguments": {"name": "bench"}}
ACCEPT = "application/json, text/event-stream"
SERVERS = {"stateless": ("floor", "mcpkit", "mcpkit-hypercorn", "sdk-stateless"),
           "session": ("mcpkit", "mcpkit-hypercorn", "sdk-stateful")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, what: str, proc: "subprocess.Popen[bytes] | None" = None, seconds: float = 30) -> None:
    """Wait until something listens on loopback ``port`` (``proc``, when given, must not exit first)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port} within {seconds:g} s")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


#: --pin SERVER[,LOAD]: the CPU every server runs on (None: wherever the OS puts them)
SERVER_CPU: str | None = None


class Server:
    extra: list[str] = []  # more `mcpkit serve` arguments (bench_scaleout)

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.port = free_port()
        if kind.startswith("mcpkit"):
            cmd = [str(BIN / "mcpkit"), "serve", "--transport", "http", "--port", str(self.port), "--plugin", "hello",
                   "--server", "hypercorn" if kind == "mcpkit-hypercorn" else "mcpkit", *self.extra]
        elif kind == "floor":
            cmd = [sys.executable, str(HERE / "http_floor_server.py"), str(self.port)]
        else:
            cmd = [sys.executable, str(HERE / "sdk_http_server.py"), str(self.port),
                   "stateless-json" if kind == "sdk-stateless" else "default"]
        env = dict(os.environ, MCPKIT_LOG_LEVEL="error", MCPKIT_MAX_CONNECTIONS="4096", MCPKIT_MAX_SESSIONS="4096")
        if SERVER_CPU is not None:  # --pin: every server on one CPU, so placement is the same for all
            cmd = ["taskset", "-c", SERVER_CPU, *cmd]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        wait_port(self.port, kind)

    def session(self) -> str:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
        c.request("POST", "/mcp", json.dumps(body), {"Content-Type": "application/json", "Accept": ACCEPT})
        r = c.getresponse()
        sid = r.getheader("mcp-session-id")
        r.read()
        c.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                  {"Content-Type": "application/json", "Accept": ACCEPT, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
        c.getresponse().read()
        c.close()
        assert sid, f"{self.kind} opened no session"
        return sid

    def request(self, era: str) -> tuple[dict[str, str], dict]:
        base = {"Content-Type": "application/json", "Accept": ACCEPT}
        if era == "stateless":
            return ({**base, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "greet"},
                    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**CALL, "_meta": META}})
        return ({**base, "Mcp-Session-Id": self.session(), "MCP-Protocol-Version": "2025-11-25"},
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": CALL})

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def run_wrk(server: Server, headers: dict[str, str], body: dict, conns: int, seconds: float) -> dict[str, float]:
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    c.request("POST", "/mcp", json.dumps(body), headers)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    assert r.status == 200 and "Hello, bench." in text, (server.kind, r.status, text[:300])
    script = "".join(f'wrk.headers["{k}"] = "{v}"\n' for k, v in headers.items())
    script += f'wrk.method = "POST"\nwrk.body = {json.dumps(json.dumps(body))}\n'
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
    cpu0 = cpu_seconds(server.proc.pid)
    out = subprocess.run(["wrk", f"-t{min(2, conns)}", f"-c{conns}", f"-d{max(1, round(seconds))}s", "--latency",
                          "-s", f.name, f"http://127.0.0.1:{server.port}/mcp"], capture_output=True, text=True, check=True).stdout
    cpu = cpu_seconds(server.proc.pid) - cpu0
    os.unlink(f.name)
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    assert errors is None, f"{server.kind}: {out}"
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
            "cpu_us": cpu / max(total, 1) * 1e6, "p50_ms": _latency(out, "50%"), "p99_ms": _latency(out, "99%")}


def _latency(out: str, pct: str) -> float:
    m = re.search(rf"{re.escape(pct)}\s+([\d.]+)(us|ms|s)", out)
    if not m:
        return float("nan")
    return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]


def idle_streams(server: Server, count: int) -> float:
    """RSS growth (MiB) for holding ``count`` idle SSE streams: ``count`` sessions, each with
    its standalone GET stream open and nothing to say."""
    sids = [server.session() for _ in range(count)]
    before = rss_mib(server.proc.pid)
    socks = []
    try:
        for sid in sids:
            s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            s.sendall((f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {sid}\r\n"
                       f"MCP-Protocol-Version: 2025-11-25\r\n\r\n").encode())
            socks.append(s)
        for s in socks:
            assert s.recv(1024).startswith(b"HTTP/1.1 200"), server.kind  # the stream is open
        time.sleep(1)
        return rss_mib(server.proc.pid) - before
    finally:
        for s in socks:
            s.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conns", default="1,8,64")
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--servers", help="only these servers (comma-separated), e.g. floor,mcpkit")
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--chart", type=Path, default=HERE.parent / "docs" / "benchmarks-http.svg", help="the SVG chart")
    ap.add_argument("--replot", type=Path, metavar="JSON", help="report and chart again from a --json file, running nothing")
    ap.add_argument("--pin", metavar="SERVER[,LOAD]", help="run every server on CPU SERVER and wrk on CPU LOAD (default: "
                    "the same CPU): the same placement for every server, so a server that leaves its CPU idle "
                    "more often is not measured differently")
    args = ap.parse_args()
    if args.pin:
        global SERVER_CPU
        server_cpu, _, load_cpu = args.pin.partition(",")
        SERVER_CPU = server_cpu
        os.sched_setaffinity(0, {int(load_cpu or server_cpu)})  # wrk, started from here, inherits it
    if args.replot:
        saved = json.loads(args.replot.read_text())
        runs = {tuple(k.split("|")[:2]) + (int(k.split("|")[2]),): v for k, v in saved["runs"].items()}
        conns = sorted({n for _, _, n in runs})
        report(runs, saved["streams"], conns, argparse.Namespace(**{**vars(args), "json": None, "streams": saved.get("count", 1000),
                                                                    "rounds": len(next(iter(runs.values())))}))
        return
    if shutil.which("wrk") is None:
        sys.exit("bench_http needs wrk (Debian package wrk; `make bench-http` installs it)")
    conns = [int(c) for c in args.conns.split(",")]
    if args.servers:
        wanted = set(args.servers.split(","))
        for era in list(SERVERS):
            SERVERS[era] = tuple(k for k in SERVERS[era] if k in wanted)
            if not SERVERS[era]:
                del SERVERS[era]
    kinds = sorted({k for ks in SERVERS.values() for k in ks})
    servers = {k: Server(k) for k in kinds}
    results: dict[tuple[str, str, int], list[dict[str, float]]] = {}
    try:
        requests = {(era, k): servers[k].request(era) for era, ks in SERVERS.items() for k in ks}
        for era, ks in SERVERS.items():  # warm-up
            for k in ks:
                run_wrk(servers[k], *requests[(era, k)], 8, 1)
        for rnd in range(args.rounds):
            for era, ks in SERVERS.items():
                for n in conns:
                    for k in ks:
                        results.setdefault((era, k, n), []).append(run_wrk(servers[k], *requests[(era, k)], n, args.seconds))
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)
        streams = {k: idle_streams(servers[k], args.streams) for k in ("mcpkit", "mcpkit-hypercorn", "sdk-stateful")
                   if k in servers and args.streams}
    finally:
        for s in servers.values():
            s.stop()
    report(results, streams, conns, args)


def report(results: dict[tuple[str, str, int], list[dict[str, float]]], streams: dict[str, float], conns: list[int],
           args: argparse.Namespace) -> None:
    med = {key: {m: statistics.median(r[m] for r in runs) for m in runs[0]} for key, runs in results.items()}
    print(f"machine: {os.cpu_count()} CPUs; wrk, {args.seconds:g} s per run, {args.rounds} alternating rounds, medians")
    for era, ks in SERVERS.items():
        ref = ks[-1]
        print(f"\n{'2026-07-28 stateless' if era == 'stateless' else 'handshake era, one session'} (ratios against {ref})")
        floor = "floor" in ks
        print("| server | conns | req/s | × | CPU µs/req | × |" + (" × floor |" if floor else "") + " p50 ms | p99 ms |")
        print("|---|---|---|---|---|---|" + ("---|" if floor else "") + "---|---|")
        for n in conns:
            for k in ks:
                m, r = med[(era, k, n)], med[(era, ref, n)]
                vs_floor = f" {m['cpu_us'] / med[(era, 'floor', n)]['cpu_us']:.2f} |" if floor else ""
                print(f"| {k} | {n} | {m['rps']:,.0f} | {m['rps'] / r['rps']:.2f} | {m['cpu_us']:.0f} | "
                      f"{m['cpu_us'] / r['cpu_us']:.2f} |{vs_floor} {m['p50_ms']:.2f} | {m['p99_ms']:.2f} |")
    print(f"\n{args.streams} idle SSE streams, RSS growth: " + ", ".join(f"{k} {v:.1f} MiB" for k, v in streams.items()))
    chart = args.chart
    groups = [(f"{'stateless' if era == 'stateless' else 'session'} c={n}", [(k, med[(era, k, n)]) for k in ks])
              for era, ks in SERVERS.items() for n in conns]
    chart.write_text(bar_chart(groups))
    print(f"chart: {chart}")
    if args.json:
        args.json.write_text(json.dumps({"runs": {f"{e}|{k}|{n}": v for (e, k, n), v in results.items()}, "streams": streams,
                                         "count": args.streams, "seconds": args.seconds}, indent=1))


if __name__ == "__main__":
    main()

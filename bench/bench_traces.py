"""What traces cost: the stateless tools/call benchmark with telemetry off and with traces on.

    .venv/bin/python bench/bench_traces.py [--telemetry off,traces,traces-noexport] [--rounds 5] [--seconds 5] [--conns 1,8]

Servers, all `mcpkit serve --transport http --plugin hello` started once and measured in
alternating rounds (this VM drifts within minutes, so every round measures every mode back to back):
  * off              no telemetry (the default)
  * traces           --traces, exporting over OTLP/HTTP to a sink in this process (a loopback HTTP
                     server that reads each POST /v1/traces and answers 200): the server's CPU
                     includes its exporter thread (protobuf encoding, the HTTP posts)
  * traces-noexport  --traces with OTEL_TRACES_EXPORTER=none: spans made and ended, not exported
  * traces-ratio10   --traces sampling one trace in ten (OTEL_TRACES_SAMPLER=parentbased_traceidratio, 0.1)
wrk drives keep-alive connections; the figure is the server's CPU per call (from /proc), the
median over the rounds, and the difference to off.

``--micro CALLS`` measures the observer path alone in this process instead (see micro()).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_http import BIN, free_port, run_wrk, wait_port  # noqa: E402  (the same wrk driver and /proc reading)

HERE = Path(__file__).resolve().parent
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent / ".conformance" / "site"), os.environ.get("PYTHONPATH")]))
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "greet"}
#: --pin CPU: the CPU the servers and wrk run on (None: wherever the OS puts them)
PIN: str | None = None
BODY = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greet", "arguments": {"name": "bench"}, "_meta": META}}


class Sink:
    """An OTLP/HTTP endpoint that takes what it is sent and counts the posts."""

    def __init__(self, port: int = 0) -> None:
        self.posts = 0
        self.bytes = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(n)
                sink.posts += 1
                sink.bytes += n
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        if not port:
            threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Server:
    def __init__(self, kind: str, sink: Sink) -> None:
        self.kind = kind
        self.port = free_port()
        args = [str(BIN / "mcpkit"), "serve", "--transport", "http", "--port", str(self.port), "--plugin", "hello"]
        env = dict(os.environ, MCPKIT_LOG_LEVEL="error", MCPKIT_MAX_CONNECTIONS="4096")
        if kind != "off":
            args.append("--traces")
            env.update(OTEL_SERVICE_NAME=f"bench-{kind}", OTEL_EXPORTER_OTLP_ENDPOINT=sink.endpoint,
                       OTEL_TRACES_EXPORTER="none" if kind == "traces-noexport" else "otlp")
            if kind == "traces-ratio10":  # one trace in ten recorded and exported
                env.update(OTEL_TRACES_SAMPLER="parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG="0.1")
        if PIN is not None:  # server and wrk on one CPU: no cross-CPU wake-ups in the CPU per call
            args = ["taskset", "-c", PIN, *args]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        wait_port(self.port, kind)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def micro(calls: int, rounds: int) -> None:
    """The observer path alone, in this process: a SERVER span per call (with the attributes a
    stateless tools/call gets), made current, ended, batched and exported to a sink in another
    process; CPU of every thread here (the exporter's included) per call, against the same loop
    with nothing watching. Less exposed to the other processes on a busy machine than wrk."""
    port = free_port()
    sink = subprocess.Popen([sys.executable, __file__, "--sink", str(port)], stdout=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        os.environ.update(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}", OTEL_SERVICE_NAME="bench-micro")
        from mcpkit.protocol.jsonrpc import Answer
        from mcpkit.server.observe import RequestRecord
        from mcpkit.server.tracing import TracingObserver, tracer_provider

        from opentelemetry.sdk.trace import TracerProvider

        from mcpkit.server.lean_trace import Discard, LeanTracerProvider

        provider, _ = tracer_provider("bench-micro")  # mcpkit's lean provider, exporting with mcpkit's OTLP exporter
        obs = TracingObserver(provider)
        sdk = TracingObserver(TracerProvider())  # the SDK's spans, no processor: what the lean span replaced
        bare = TracingObserver(LeanTracerProvider(provider.resource, Discard()))  # lean spans, nothing exported
        answer = Answer(1, {"content": [], "isError": False})

        def off(n: int) -> None:
            for i in range(n):
                RequestRecord("tools/call", i, "http", None, "2026-07-28", "greet", META, HEADERS, "bench").finish(answer)

        def traced(n: int) -> None:
            for i in range(n):
                rec = RequestRecord("tools/call", i, "http", None, "2026-07-28", "greet", META, HEADERS, "bench")
                with obs.request(rec):
                    rec.finish(answer)
                if i % 512 == 511:  # as fast as the exporter: nothing dropped, everything measured
                    provider.force_flush()
            provider.force_flush()

        def unexported(n: int) -> None:
            for i in range(n):
                rec = RequestRecord("tools/call", i, "http", None, "2026-07-28", "greet", META, HEADERS, "bench")
                with bare.request(rec):
                    rec.finish(answer)

        def sdk_spans(n: int) -> None:
            for i in range(n):
                rec = RequestRecord("tools/call", i, "http", None, "2026-07-28", "greet", META, HEADERS, "bench")
                with sdk.request(rec):
                    rec.finish(answer)

        modes = {"off": off, "sdk span": sdk_spans, "lean span": unexported, "traces": traced}
        res: dict[str, list[float]] = {name: [] for name in modes}
        traced(2000)
        for r in range(rounds):
            for name in (list(modes) if r % 2 == 0 else list(modes)[::-1]):
                t = time.process_time()
                modes[name](calls)
                res[name].append((time.process_time() - t) / calls * 1e6)
        off_us = statistics.median(res["off"])
        print(f"in-process observer path, {rounds} alternating rounds of {calls} calls (CPU of every thread here, per call):")
        for name, rows in res.items():
            med = statistics.median(rows)
            print(f"  {name:10} {med:6.1f} us  (+{med - off_us:.1f} over off; rounds {', '.join(f'{x:.1f}' for x in rows)})")
    finally:
        sink.terminate()
        sink.wait(10)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--sink":  # the OTLP sink of micro(), in a process of its own
        Sink(int(sys.argv[2])).server.serve_forever()
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--telemetry", default="off,traces,traces-noexport", help="modes, comma-separated")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--conns", default="1,8")
    ap.add_argument("--pin", metavar="CPU", help="run the servers and wrk on this CPU (same-CPU placement)")
    ap.add_argument("--micro", type=int, default=0, metavar="CALLS", help="only the in-process observer path, CALLS per round")
    a = ap.parse_args()
    if a.micro:
        micro(a.micro, a.rounds)
        return
    global PIN
    PIN = a.pin
    if PIN is not None:
        os.sched_setaffinity(0, {int(PIN)})  # wrk, started from here, inherits it
    modes = [m.strip() for m in a.telemetry.split(",") if m.strip()]
    conns = [int(c) for c in a.conns.split(",")]
    sink = Sink()
    servers = {m: Server(m, sink) for m in modes}
    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    try:
        for r in range(a.rounds):
            for c in conns:
                for m in (modes if r % 2 == 0 else modes[::-1]):
                    out = run_wrk(servers[m], HEADERS, BODY, c, a.seconds)
                    results.setdefault((m, c), []).append(out)
                    print(f"round {r + 1} conns {c} {m:16} {out['rps']:8.0f} req/s {out['cpu_us']:6.1f} us CPU/call", file=sys.stderr)
    finally:
        for s in servers.values():
            s.stop()
    print(f"\nstateless tools/call, {a.rounds} alternating rounds of {a.seconds:g} s; medians "
          f"(OTLP sink got {sink.posts} posts, {sink.bytes / 1e6:.1f} MB)")
    print(f"{'mode':16} {'conns':>5} {'req/s':>8} {'CPU us/call':>12} {'vs off':>8} {'p50 ms':>7} {'p99 ms':>7}")
    for c in conns:
        off = statistics.median(x["cpu_us"] for x in results[("off", c)]) if ("off", c) in results else None
        for m in modes:
            rows = results[(m, c)]
            cpu = statistics.median(x["cpu_us"] for x in rows)
            diff = f"{cpu - off:+8.1f}" if off is not None and m != "off" else " " * 8
            print(f"{m:16} {c:5d} {statistics.median(x['rps'] for x in rows):8.0f} {cpu:12.1f} {diff} "
                  f"{statistics.median(x['p50_ms'] for x in rows):7.2f} {statistics.median(x['p99_ms'] for x in rows):7.2f}")
    print(json.dumps({f"{m}/{c}": statistics.median(x["cpu_us"] for x in rows) for (m, c), rows in results.items()}))


if __name__ == "__main__":
    main()

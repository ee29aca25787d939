"""Telemetry benchmark: what watching the server costs on the stateless tools/call hot path.

    make bench-telemetry   (or .venv/bin/python bench/bench_telemetry.py [--seconds 5] [--rounds 5] [--conns 1,8]
                            [--variants off,metrics,otel,traces,traces-none,traces-ratio10] [--baseline DIR] [--pin CPU])
    .venv/bin/python bench/bench_telemetry.py --micro CALLS [--rounds 5]   (the span path alone, in process)

`mcpkit serve --transport http --plugin hello` servers, one per variant, started once and
measured in alternating rounds (this VM drifts by tens of percent within minutes):
  * main      (with --baseline DIR) the mcpkit package in DIR, telemetry off: today's server
  * main-traces (with --baseline DIR and a traces variant) that package with --traces, exporting
              to the sink: the traces of before, side by side; with --baseline-traces every traces
              variant has its main- twin (main-traces-none, main-traces-ratio10)
  * off       telemetry off: nothing in app.observers (what every server runs unless told)
  * metrics   --metrics: every request counted into the in-process store; /metrics scraped
              by this driver once a second meanwhile, as a Prometheus would
  * otel      --metrics --traces with OTEL_METRICS_EXPORTER=otlp and OTEL_EXPORTER_OTLP_ENDPOINT
              pointing to a small OTLP/HTTP sink in this driver: a span per request, and the
              metrics over OTLP too (every second here, OTEL_METRIC_EXPORT_INTERVAL=1000; spans
              batched, exported every second). Needs the otel extra, as the traces variants do.
  * traces    --traces alone, exporting over OTLP/HTTP to the sink (default batching): the
              server's CPU includes its exporter thread (encoding, the HTTP posts)
  * traces-none   --traces with OTEL_TRACES_EXPORTER=none: spans made and ended, not exported
  * traces-ratio10  --traces sampling one trace in ten (parentbased_traceidratio, 0.1)
wrk drives keep-alive connections with the 2026-07-28 stateless greet call (bench_http's); the
figures are medians over the rounds: requests/s, server CPU µs per call (from /proc), p50/p99,
and each variant's CPU per call against `off` per round.

Then, in this process, the work watching adds to one request, timed alone (no sockets, no other
load in the way): the session runner's observed path (RequestRecord, finish, the metrics
observer) against the unobserved one, over the same stand-in handler. On a shared VM the
end-to-end ratios move by ±10-20 % per round; this number does not.
"""

from __future__ import annotations

import argparse
import http.server
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

from bench_http import BIN, Server, free_port, run_wrk, wait_port

VARIANTS = ("off", "metrics", "otel", "traces", "traces-none", "traces-ratio10")
#: --pin CPU: the CPU the servers and wrk run on (None: wherever the OS puts them)
PIN: str | None = None


class TelemetryServer(Server):
    """bench_http's server, with the telemetry of one variant."""

    def __init__(self, variant: str, sink_port: int, baseline: str | None = None) -> None:
        self.kind = variant
        self.port = free_port()
        cmd = [str(BIN / "mcpkit"), "serve", "--transport", "http", "--port", str(self.port), "--plugin", "hello"]
        env = dict(os.environ, MCPKIT_LOG_LEVEL="error", MCPKIT_MAX_CONNECTIONS="4096")
        for name in [n for n in env if n.startswith("OTEL_")]:
            del env[name]
        if variant.startswith("main"):  # the same command on another checkout's mcpkit package
            env["PYTHONPATH"] = os.pathsep.join([baseline or "", env.get("PYTHONPATH", "")])
        if variant in ("metrics", "otel"):
            cmd.append("--metrics")
        if variant == "otel":
            cmd.append("--traces")
            env.update(OTEL_METRICS_EXPORTER="otlp", OTEL_LOGS_EXPORTER="none",
                       OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{sink_port}", OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
                       OTEL_METRIC_EXPORT_INTERVAL="1000", OTEL_BSP_SCHEDULE_DELAY="1000", OTEL_SERVICE_NAME="bench")
        kind = variant.removeprefix("main-")  # main-traces-none: traces-none on the baseline's package
        if kind.startswith("traces"):
            cmd.append("--traces")
            env.update(OTEL_SERVICE_NAME=f"bench-{variant}", OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{sink_port}",
                       OTEL_TRACES_EXPORTER="none" if kind == "traces-none" else "otlp")
            if kind == "traces-ratio10":  # one trace in ten recorded and exported
                env.update(OTEL_TRACES_SAMPLER="parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG="0.1")
        if PIN is not None:  # server and wrk on one CPU: no cross-CPU wake-ups in the CPU per call
            cmd = ["taskset", "-c", PIN, *cmd]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        wait_port(self.port, variant)


class Sink(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver that takes every export and answers an empty success."""

    received: dict[str, int] = {}

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        Sink.received[self.path] = Sink.received.get(self.path, 0) + 1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def start_sink() -> int:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return int(server.server_address[1])


def scrape_forever(servers: list[Server], stop: threading.Event) -> None:
    """GET /metrics of every server with --metrics once a second, as Prometheus would."""
    while not stop.wait(1.0):
        for s in servers:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{s.port}/metrics", timeout=5) as r:
                    r.read()
            except OSError:
                pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--conns", default="1,8")
    ap.add_argument("--baseline", metavar="DIR", help="a folder holding another mcpkit package (e.g. `git archive main mcpkit`"
                    " unpacked): measured too, as `main`, telemetry off")
    ap.add_argument("--variants", default="off,metrics,otel,traces", help=f"which of {','.join(VARIANTS)} (off is always measured)")
    ap.add_argument("--baseline-traces", action="store_true",
                    help="with --baseline: every traces variant on DIR's package too (main-traces-none …), not only traces")
    ap.add_argument("--pin", metavar="CPU", help="run the servers and wrk on this CPU (same-CPU placement)")
    ap.add_argument("--micro", type=int, default=0, metavar="CALLS", help="only the in-process span path, CALLS per round")
    args = ap.parse_args()
    if args.micro:
        from bench_spans import micro

        micro(args.micro, args.rounds)
        return
    global PIN
    PIN = args.pin
    if PIN is not None:
        os.sched_setaffinity(0, {int(PIN)})  # wrk, started from here, inherits it
    if shutil.which("wrk") is None:
        sys.exit("bench_telemetry needs wrk (Debian package wrk; `make bench-telemetry` installs it)")
    variants = ["off"] + [v for v in VARIANTS if v != "off" and v in args.variants.split(",")]
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        print("the otel extra is not installed: otel and traces are left out", file=sys.stderr)
        variants = [v for v in variants if v != "otel" and not v.startswith("traces")]
    if args.baseline:
        variants.insert(0, "main")
        if args.baseline_traces:  # each traces variant on the baseline's package too
            variants[1:1] = [f"main-{v}" for v in variants if v.startswith("traces")]
        elif any(v.startswith("traces") for v in variants):
            variants.insert(1, "main-traces")
    conns = [int(c) for c in args.conns.split(",")]
    sink = start_sink()
    servers = {v: TelemetryServer(v, sink, args.baseline) for v in variants}
    stop = threading.Event()
    scraper = threading.Thread(target=scrape_forever, args=([servers[v] for v in variants if v in ("metrics", "otel")], stop),
                               daemon=True)
    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    try:
        requests = {v: servers[v].request("stateless") for v in variants}
        for v in variants:  # warm-up
            run_wrk(servers[v], *requests[v], 8, 1)
        scraper.start()
        for rnd in range(args.rounds):
            order = variants if rnd % 2 == 0 else variants[::-1]
            for n in conns:
                for v in order:
                    results.setdefault((v, n), []).append(run_wrk(servers[v], *requests[v], n, args.seconds))
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        stop.set()
        for s in servers.values():
            s.stop()
    report(results, variants, conns, args)
    timed = in_process()
    print(f"\nin process, µs per request: unobserved {timed['off']:.2f}, observed with metrics {timed['metrics']:.2f}: "
          f"+{timed['metrics'] - timed['off']:.2f} µs per call")
    if any(v == "otel" or v.removeprefix("main-").startswith("traces") for v in variants):
        print(f"\nOTLP sink received: {dict(sorted(Sink.received.items())) or 'nothing'}")


def in_process(n: int = 200_000) -> dict[str, float]:
    """µs per request of the unobserved and observed serving paths (the session runner's code
    path around ``dispatcher.answer``), the handler a coroutine that answers at once."""
    import msgspec
    import trio

    import mcpkit.protocol.connection as connection
    from mcpkit.protocol.jsonrpc import Answer
    from mcpkit.protocol.types import CallToolParams
    from mcpkit.server.app import App
    from mcpkit.server.metrics import MetricsObserver
    from mcpkit.server.observe import Observers, RequestRecord
    from mcpkit.server.registry import Registry

    features = connection.Features("2026-07-28", *([True] * 11))
    params = msgspec.Raw(b'{"name":"greet","arguments":{"name":"bench"},"_meta":{"traceparent":"00-x-y-01"}}')
    app = App(Registry())

    async def answer(req: object) -> Answer:
        return Answer(1, {"content": []})

    async def serve(observers: Observers, req: connection.RequestReceived) -> None:  # session_runner.serve's shape
        if not observers:
            await answer(req)
            return
        rec = RequestRecord.of(req, "http", None)
        try:
            with observers.request(rec):
                rec.finish(await answer(req))
        finally:
            observers.ended(rec)

    async def main() -> dict[str, float]:
        out: dict[str, list[float]] = {"off": [], "metrics": []}
        for _ in range(3):
            for label in out:
                observers = Observers()
                if label == "metrics":
                    observers.add(MetricsObserver(app))
                reqs = []
                for _ in range(n):
                    req = connection.RequestReceived(1, "tools/call", params, features, None, {"name": "bench"}, {}, None)
                    req.params_as(CallToolParams)
                    reqs.append(req)
                start = time.perf_counter()
                for req in reqs:
                    await serve(observers, req)
                out[label].append((time.perf_counter() - start) / n * 1e6)
        return {k: min(v) for k, v in out.items()}

    return trio.run(main)


def report(results: dict[tuple[str, int], list[dict[str, float]]], variants: list[str], conns: list[int],
           args: argparse.Namespace) -> None:
    print(f"machine: {os.cpu_count()} CPUs; wrk, {args.seconds:g} s per run, {args.rounds} alternating rounds, medians;"
          " stateless tools/call (greet)")
    print("| telemetry | conns | req/s | CPU µs/call | × off (median of per-round ratios) | per round | µs over off (median of per-round differences) | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in conns:
        off = results[("off", n)]
        for v in variants:
            runs = results[(v, n)]
            med = {m: statistics.median(r[m] for r in runs) for m in runs[0]}
            ratios = [r["cpu_us"] / o["cpu_us"] for r, o in zip(runs, off)]
            diff = statistics.median(r["cpu_us"] - o["cpu_us"] for r, o in zip(runs, off))
            print(f"| {v} | {n} | {med['rps']:,.0f} | {med['cpu_us']:.1f} | {statistics.median(ratios):.3f} | "
                  f"{' '.join(f'{x:.3f}' for x in ratios)} | {diff:+.1f} | {med['p50_ms']:.2f} | {med['p99_ms']:.2f} |")


if __name__ == "__main__":
    main()

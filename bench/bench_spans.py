"""The span path alone, in process: what a traced stateless tools/call adds to the serving
thread's work and the exporter's, without sockets or other processes in the way.

    .venv/bin/python bench/bench_telemetry.py --micro 20000 [--rounds 5]

Modes, measured in alternating rounds (CPU of every thread of this process, per call):
  * off          RequestRecord made and finished, nothing watching
  * sdk span     the SERVER span on the OpenTelemetry SDK's provider, no processor (before issue 25)
  * sdk traces   the SDK's provider and BatchSpanProcessor with mcpkit's OTLP exporter (before)
  * lean span    mcpkit's lean span (lean_trace.py), nothing exported (OTEL_TRACES_EXPORTER=none)
  * traces       the lean span, batched and exported by mcpkit's OTLP exporter (what --traces does)
Exports go to an OTLP/HTTP sink in a process of its own (this file run with --sink PORT).
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from bench_http import META, free_port

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "greet"}


class _Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def micro(calls: int, rounds: int) -> None:
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
        for name in ("OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"):
            os.environ.pop(name, None)
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from mcpkit.protocol.jsonrpc import Answer
        from mcpkit.server.lean_trace import LeanTracerProvider
        from mcpkit.server.span_batching import Discard
        from mcpkit.server.observe import RequestRecord
        from mcpkit.server.otlp_export import OtlpHttpSpanExporter
        from mcpkit.server.tracing import TracingObserver, tracer_provider

        lean, _ = tracer_provider("bench-micro")  # mcpkit's lean provider, exporting with mcpkit's OTLP exporter
        sdk_export = TracerProvider(resource=lean.resource)
        sdk_export.add_span_processor(BatchSpanProcessor(OtlpHttpSpanExporter()))
        answer = Answer(1, {"content": [], "isError": False})

        def loop(provider: Any) -> Callable[[int], None]:
            obs = TracingObserver(provider) if provider is not None else None
            flush = getattr(provider, "force_flush", None)

            def run(n: int) -> None:
                for i in range(n):
                    rec = RequestRecord("tools/call", i, "http", None, "2026-07-28", "greet", META, HEADERS, "bench")
                    if obs is None:
                        rec.finish(answer)
                        continue
                    with obs.request(rec):
                        rec.finish(answer)
                    if flush is not None and i % 512 == 511:  # as fast as the exporter: nothing dropped, all measured
                        flush()
                if flush is not None:
                    flush()
            return run

        modes = {"off": loop(None), "sdk span": loop(TracerProvider()), "sdk traces": loop(sdk_export),
                 "lean span": loop(LeanTracerProvider(lean.resource, Discard())), "traces": loop(lean)}
        res: dict[str, list[float]] = {name: [] for name in modes}
        for run in modes.values():
            run(2000)
        for r in range(rounds):
            for name in (list(modes) if r % 2 == 0 else list(modes)[::-1]):
                t = time.process_time()
                modes[name](calls)
                res[name].append((time.process_time() - t) / calls * 1e6)
        off_us = statistics.median(res["off"])
        print(f"in-process span path, {rounds} alternating rounds of {calls} calls (CPU of every thread here, per call):")
        for name, rows in res.items():
            med = statistics.median(rows)
            print(f"  {name:10} {med:6.1f} us  (+{med - off_us:.1f} over off; rounds {', '.join(f'{x:.1f}' for x in rows)})")
    finally:
        sink.terminate()
        sink.wait(10)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--sink":
        ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), _Sink).serve_forever()

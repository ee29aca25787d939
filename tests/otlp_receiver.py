"""A real OTLP/HTTP trace endpoint for the tests: an HTTP server on a loopback port that takes
``POST /v1/traces`` as an exporter sends it (protobuf, plain or gzip), decodes the
``ExportTraceServiceRequest`` with the OpenTelemetry protobuf definitions, and keeps every span.
Nothing of the server under test is replaced: it exports with its own SDK and exporter."""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus

KINDS = {PbSpan.SPAN_KIND_SERVER: "SERVER", PbSpan.SPAN_KIND_CLIENT: "CLIENT", PbSpan.SPAN_KIND_INTERNAL: "INTERNAL",
         PbSpan.SPAN_KIND_PRODUCER: "PRODUCER", PbSpan.SPAN_KIND_CONSUMER: "CONSUMER"}
STATUS = {PbStatus.STATUS_CODE_UNSET: "UNSET", PbStatus.STATUS_CODE_OK: "OK", PbStatus.STATUS_CODE_ERROR: "ERROR"}


@dataclass
class Span:
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root span
    attributes: dict[str, Any]
    status: str
    status_message: str
    service: str
    links: list[tuple[str, str]] = field(default_factory=list)  # (trace id, span id)
    trace_state: str = ""
    instance: str = ""  # the resource's service.instance.id (one per process)


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which) if which else None


def decode(body: bytes) -> list[Span]:
    req = ExportTraceServiceRequest()
    req.ParseFromString(body)
    out = []
    for rs in req.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(Span(s.name, KINDS.get(s.kind, str(s.kind)), s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(),
                                {kv.key: _value(kv.value) for kv in s.attributes}, STATUS[s.status.code], s.status.message,
                                str(resource.get("service.name", "")), [(ln.trace_id.hex(), ln.span_id.hex()) for ln in s.links],
                                s.trace_state, str(resource.get("service.instance.id", ""))))
    return out


class OtlpReceiver:
    """``with OtlpReceiver() as otlp:`` — ``otlp.endpoint`` for OTEL_EXPORTER_OTLP_ENDPOINT,
    ``otlp.spans`` as received, ``otlp.wait_for(cond)``."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.posts: list[str] = []  # the paths posted to
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with receiver.lock:
                    receiver.posts.append(self.path)
                if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_response(404)
                    self.end_headers()
                    return
                spans = decode(body)
                with receiver.lock:
                    receiver.spans.extend(spans)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def env(self, service: str) -> dict[str, str]:
        """The standard variables that point a process's exporter here, quickly."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint, "OTEL_SERVICE_NAME": service, "OTEL_BSP_SCHEDULE_DELAY": "100",
                "OTEL_TRACES_EXPORTER": "otlp"}

    def named(self, name: str, service: str | None = None) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if s.name == name and (service is None or s.service == service)]

    def wait_for(self, cond: Callable[[], Any], timeout: float = 15) -> Any:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            found = cond()
            if found:
                return found
            time.sleep(0.05)
        with self.lock:
            seen = [(s.service, s.name, s.kind) for s in self.spans]
        raise AssertionError(f"not received within {timeout} s; spans: {seen}")

    def __enter__(self) -> "OtlpReceiver":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

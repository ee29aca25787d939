"""mcpkit's own OTLP span encoder (mcpkit/server/otlp_export.py) against the reference: the
encoder of the OpenTelemetry exporter packages. Real SDK spans of every shape (kinds, parents
local and remote, trace state, attributes of every type, events, links, error status, two
scopes) encoded by both and parsed back with the OpenTelemetry protobuf definitions must be the
same messages; and the exporter posts them to a real endpoint that decodes them."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra (make install adds it)")

from opentelemetry import context, trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState  # noqa: E402

from mcpkit.server.otlp_export import OtlpHttpSpanExporter, _Encoder  # noqa: E402

from .otlp_receiver import OtlpReceiver  # noqa: E402

REMOTE = SpanContext(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, is_remote=True, trace_flags=TraceFlags(1),
                     trace_state=TraceState([("rojo", "00f067aa0ba902b7"), ("congo", "t61rcWkgMzE")]))


def record_sample(server: trace.Tracer, other: trace.Tracer) -> None:
    """Spans of every shape, under a remote parent: a SERVER span with a link, attributes of every
    type and an event; a child of another scope with an error status and an exception; a CLIENT
    span with an OK status; one span of each remaining kind. Recorded by whichever provider made
    the tracers (the SDK's here, mcpkit's lean one in test_lean_trace.py)."""
    token = context.attach(trace.set_span_in_context(NonRecordingSpan(REMOTE)))
    try:
        with server.start_as_current_span("tools/call work", kind=SpanKind.SERVER, links=[Link(REMOTE, {"why": "http"})],
                                          attributes={"mcp.method.name": "tools/call", "jsonrpc.request.id": "7",
                                                      "flag": True, "count": -42, "big": 2**62, "ratio": 0.25,
                                                      "names": ("a", "b"), "ints": [1, 2, 3], "empty": ""}) as s:
            s.add_event("started", {"at": 1, "what": "x"})
            with other.start_as_current_span("inner") as inner:
                inner.set_status(Status(StatusCode.ERROR, "broken on purpose"))
                inner.record_exception(ValueError("boom"))
            with server.start_as_current_span("tools/call again", kind=SpanKind.CLIENT) as c:
                c.set_status(Status(StatusCode.OK))
            for kind in (SpanKind.PRODUCER, SpanKind.CONSUMER, SpanKind.INTERNAL):
                server.start_span(f"k{kind.value}", kind=kind).end()
    finally:
        context.detach(token)
    with server.start_as_current_span("root without parent"):
        pass


def spans() -> list:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "enc", "deployment.environment": "test", "n": 3}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    record_sample(provider.get_tracer("mcpkit", "0.1.0"), provider.get_tracer("plugin.scope"))
    return list(memory.get_finished_spans())


def parsed(data: bytes) -> ExportTraceServiceRequest:
    """The message, without what the reference leaves out: the trace flags (bits 0-7 of a span's
    flags) and a link's trace state, which mcpkit writes (the proto has both)."""
    msg = ExportTraceServiceRequest()
    msg.ParseFromString(data)
    for rs in msg.resource_spans:
        for ss in rs.scope_spans:
            for s in ss.spans:
                s.flags &= ~0xFF
                for link in s.links:
                    link.trace_state = ""
    return msg


def test_the_encoding_matches_the_reference_encoder() -> None:
    batch = spans()
    assert len(batch) == 7
    raw = ExportTraceServiceRequest()
    raw.ParseFromString(_Encoder().request(batch))
    work = next(s for ss in raw.resource_spans[0].scope_spans for s in ss.spans if s.name == "tools/call work")
    assert work.links[0].trace_state == "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE" and work.flags == 0x301
    ours = parsed(_Encoder().request(batch))
    reference = parsed(encode_spans(batch).SerializeToString())
    assert ours == reference, f"{ours}\n---\n{reference}"
    again = _Encoder()  # with everything cached from a first batch, the bytes stay the same
    again.request(batch)
    assert parsed(again.request(batch)) == reference


def test_the_exporter_posts_to_an_otlp_endpoint() -> None:
    batch = spans()
    with OtlpReceiver() as otlp:
        exporter = OtlpHttpSpanExporter(f"{otlp.endpoint}/v1/traces")
        assert exporter.export(batch) == SpanExportResult.SUCCESS
        assert exporter.export(batch[:1]) == SpanExportResult.SUCCESS  # on the kept-alive connection
        exporter.shutdown()
        assert exporter.export(batch) == SpanExportResult.FAILURE
    assert len(otlp.spans) == 8 and otlp.posts == ["/v1/traces", "/v1/traces"]
    work = next(s for s in otlp.spans if s.name == "tools/call work")
    assert (work.trace_id, work.parent_id, work.trace_state) == (f"{REMOTE.trace_id:032x}", f"{REMOTE.span_id:016x}",
                                                                 "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
    assert work.attributes["names"] == ["a", "b"] and work.attributes["count"] == -42 and work.service == "enc"


def test_a_refusing_endpoint_fails_the_batch_without_retrying_for_ever(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1")
    with OtlpReceiver() as otlp:
        exporter = OtlpHttpSpanExporter(f"{otlp.endpoint}/not/traces")  # the receiver answers 404 there
        assert exporter.export(spans()) == SpanExportResult.FAILURE
        assert otlp.posts == ["/not/traces"]
    exporter = OtlpHttpSpanExporter(otlp.endpoint + "/v1/traces")  # nobody listens any more: retried within 1 s
    assert exporter.export(spans()) == SpanExportResult.FAILURE

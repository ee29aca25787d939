"""mcpkit's lean tracer (mcpkit/server/lean_trace.py, span_batching.py), directly: ids, samplers and parent-based
decisions, attribute checks and limits, the OpenTelemetry API behaviour a tool's own spans rely
on (current span, children, exceptions), the bounded queue and its drops, and the OTLP bytes of
lean spans parsed back with the OpenTelemetry protobuf definitions and posted to a real
OTLP/HTTP endpoint. The end-to-end server tests are in test_traces.py."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra (make install adds it)")

from opentelemetry import context, propagate, trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased  # noqa: E402
from opentelemetry.trace import (Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags,  # noqa: E402
                                 TraceState)

from mcpkit.server.lean_trace import LeanSpan, LeanTracerProvider, Limits, sampler_from_env  # noqa: E402
from mcpkit.server.otlp_export import OtlpHttpSpanExporter, _Encoder, record  # noqa: E402
from mcpkit.server.span_batching import BatchExport, Discard  # noqa: E402

from .otlp_receiver import OtlpReceiver  # noqa: E402
from .test_otlp_encoding import REMOTE as SAMPLE_PARENT  # noqa: E402
from .test_otlp_encoding import parsed, record_sample  # noqa: E402

RESOURCE = Resource.create({"service.name": "lean", "n": 3})
REMOTE = SpanContext(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, is_remote=True, trace_flags=TraceFlags(1),
                     trace_state=TraceState([("rojo", "00f067aa0ba902b7")]))


class Kept(Discard):
    """Keeps the ended spans (the processor end of the provider; what is tested is the span)."""

    def __init__(self) -> None:
        self.spans: list[LeanSpan] = []

    def on_end(self, span: LeanSpan) -> None:
        self.spans.append(span)


def provider(sampler: str = "parentbased_always_on", arg: str | None = None, **kw: Any) -> tuple[LeanTracerProvider, Kept]:
    kept = Kept()
    return LeanTracerProvider(RESOURCE, kept, sampler_from_env(sampler, arg), **kw), kept


def under(parent: SpanContext) -> Any:
    return trace.set_span_in_context(NonRecordingSpan(parent))


def test_ids_are_random_and_children_continue_the_trace() -> None:
    p, kept = provider()
    tracer = p.get_tracer("t", "1")
    assert p.get_tracer("t", "1") is tracer and p.get_tracer("other") is not tracer
    roots = [tracer.start_span(f"r{i}") for i in range(500)]
    trace_ids = {s.get_span_context().trace_id for s in roots}
    span_ids = {s.get_span_context().span_id for s in roots}
    assert len(trace_ids) == 500 and len(span_ids) == 500
    assert all(0 < t < 2**128 for t in trace_ids) and all(0 < s < 2**64 for s in span_ids)
    assert max(trace_ids) >= 2**120 and max(span_ids) >= 2**56  # the high bits are used too
    assert all(s.parent is None and s.get_span_context().trace_flags.sampled for s in roots)
    with tracer.start_as_current_span("outer", kind=SpanKind.SERVER) as outer:
        assert trace.get_current_span() is outer
        with tracer.start_as_current_span("child") as child:
            assert trace.get_current_span() is child
    assert trace.get_current_span() is not outer
    assert child.parent == outer.get_span_context() and child.context.trace_id == outer.context.trace_id
    assert [s.name for s in kept.spans[-2:]] == ["child", "outer"] and not child.is_recording()
    remote = tracer.start_span("continued", under(REMOTE))
    assert remote.context.trace_id == REMOTE.trace_id and remote.parent is REMOTE and remote.context.trace_state == REMOTE.trace_state


def test_samplers_as_the_variables_name_them() -> None:
    ids = [random.getrandbits(128) for _ in range(2000)]
    ratio, sdk = sampler_from_env("traceidratio", "0.1"), TraceIdRatioBased(0.1)
    decisions = [ratio(None, t) for t in ids]
    assert decisions == [sdk.should_sample(None, t, "n").decision.is_sampled() for t in ids]  # the SDK's rule, id for id
    assert 100 < sum(decisions) < 300
    assert not any(sampler_from_env("traceidratio", "0")(None, t) for t in ids)
    assert all(sampler_from_env("traceidratio", "oops")(None, t) for t in ids)  # a bad ratio samples everything
    assert all(sampler_from_env("always_on")(None, t) for t in ids[:10])
    assert not any(sampler_from_env("always_off")(None, t) for t in ids[:10])
    unsampled = SpanContext(REMOTE.trace_id, REMOTE.span_id, True, TraceFlags(0))
    for name in ("parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio", "no_such_sampler"):
        s = sampler_from_env(name, "0")
        assert s(REMOTE, 5) is True and s(unsampled, 5) is False, name  # a parent's decision is kept
    assert sampler_from_env("parentbased_always_off")(None, 5) is False
    assert sampler_from_env("parentbased_traceidratio", "0")(None, ids[1]) is False
    assert sampler_from_env("no_such_sampler")(None, 5) is True  # the default: parentbased_always_on


def test_the_default_sampler_keeps_the_parents_decision_in_the_tracer() -> None:
    """parentbased_always_on, which the tracer applies without calling it: a root is sampled,
    a child follows its parent's flag, remote or local."""
    p, kept = provider()
    tracer = p.get_tracer("t")
    unsampled = SpanContext(REMOTE.trace_id, REMOTE.span_id, True, TraceFlags(0))
    spans = [tracer.start_span("root"), tracer.start_span("remote-on", under(REMOTE)),
             tracer.start_span("remote-off", under(unsampled))]
    spans.append(tracer.start_span("local-off", trace.set_span_in_context(spans[2])))
    assert [s.is_recording() for s in spans] == [True, True, False, False]
    assert [bool(s.get_span_context().trace_flags & 1) for s in spans] == [True, True, False, False]
    for s in spans:
        s.end()
    assert [s.name for s in kept.spans] == ["root", "remote-on"]


def test_an_unsampled_span_records_nothing_but_carries_the_context() -> None:
    p, kept = provider("parentbased_traceidratio", "0")
    tracer = p.get_tracer("t")
    root = tracer.start_span("dropped")
    ctx = root.get_span_context()
    assert not root.is_recording() and ctx.is_valid and not ctx.trace_flags.sampled
    child = tracer.start_span("child", trace.set_span_in_context(root))
    assert child.get_span_context().trace_id == ctx.trace_id and not child.is_recording()
    carrier: dict[str, str] = {}
    propagate.inject(carrier, trace.set_span_in_context(root))
    assert carrier["traceparent"].endswith("-00") and f"{ctx.trace_id:032x}" in carrier["traceparent"]
    sampled = tracer.start_span("followed", under(REMOTE))  # the caller sampled: so does this one
    root.end(), child.end(), sampled.end()
    assert [s.name for s in kept.spans] == ["followed"]


def test_attributes_are_checked_and_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "4")
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "3")
    monkeypatch.setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "2")
    monkeypatch.setenv("OTEL_SPAN_LINK_COUNT_LIMIT", "1")
    p, _ = provider(limits=Limits())
    span = p.get_tracer("t").start_span("s", attributes={"s": "abcdef", "i": 7, "f": 0.5, "b": True},
                                        links=[Link(REMOTE), Link(REMOTE, {"k": "v"})])
    assert span.attributes == {"s": "abc", "i": 7, "f": 0.5, "b": True}
    span.set_attribute("over", 1)  # a fifth key: dropped and counted
    span.set_attribute("i", 8)  # a key it has: replaced
    span.set_attribute("bad", {"a": 1})  # not a value OTLP's attributes carry: dropped
    span.set_attributes({"mixed": [1, "a"]})
    assert span.attributes["i"] == 8 and "over" not in span.attributes and span.dropped_attributes == 1
    assert len(span.links) == 1 and span.dropped_links == 1
    for i in range(3):
        span.add_event(f"e{i}", {"long": ["abcdef", None], "n": i})
    assert [e.name for e in span.events] == ["e0", "e1"] and span.dropped_events == 1
    assert span.events[0].attributes == {"long": ("abc", None), "n": 0}
    monkeypatch.delenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT")
    p2, _ = provider(limits=Limits())
    given = {"s": "abcdef", "seq": ("x", "y"), "n": 1}
    plain = p2.get_tracer("t").start_span("plain", attributes=given)
    assert plain.attributes == given and plain.attributes is not given  # kept as given, a copy


def test_status_exceptions_and_end_follow_the_api() -> None:
    p, kept = provider()
    tracer = p.get_tracer("t")
    with pytest.raises(KeyError):
        with tracer.start_as_current_span("fails"):
            raise KeyError("nope")
    failed = kept.spans[-1]
    assert failed.status.status_code is StatusCode.ERROR and "KeyError" in (failed.status.description or "")
    event = failed.events[0]
    assert event.name == "exception" and event.attributes["exception.type"] == "KeyError"
    assert "raise KeyError" in event.attributes["exception.stacktrace"]
    span = tracer.start_span("s")
    span.set_status(StatusCode.UNSET)
    assert span.status.status_code is StatusCode.UNSET
    span.set_status(Status(StatusCode.OK))
    span.set_status(StatusCode.ERROR, "too late")  # OK is final
    assert span.status.status_code is StatusCode.OK
    span.update_name("renamed")
    span.end(123)
    span.end(456)  # a second end changes nothing and is not exported twice
    span.set_attribute("after", 1)
    assert span.end_time == 123 and span.name == "renamed" and "after" not in span.attributes
    assert [s.name for s in kept.spans].count("renamed") == 1


def lean_batch() -> list[LeanSpan]:
    """The encoder tests' sample of every span shape, recorded by the lean provider."""
    p, kept = provider()
    record_sample(p.get_tracer("mcpkit", "0.1.0"), p.get_tracer("plugin.scope"))
    return kept.spans


def test_lean_spans_encode_as_the_reference_encoder_writes_them() -> None:
    batch = lean_batch()
    ours = parsed(_Encoder().request(batch))
    reference = parsed(encode_spans(batch).SerializeToString())  # the package encoder reads the same fields
    assert ours == reference, f"{ours}\n---\n{reference}"
    work = next(sp for ss in ours.resource_spans[0].scope_spans for sp in ss.spans if sp.name == "tools/call work")
    assert work.trace_id.hex() == f"{SAMPLE_PARENT.trace_id:032x}" and work.parent_span_id.hex() == f"{SAMPLE_PARENT.span_id:016x}"
    assert {ss.scope.name for ss in ours.resource_spans[0].scope_spans} == {"mcpkit", "plugin.scope"}


def test_batches_reach_an_otlp_endpoint_and_a_full_queue_drops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")  # only a full batch or a flush exports
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "3")
    with OtlpReceiver() as otlp:
        batcher = BatchExport(OtlpHttpSpanExporter(f"{otlp.endpoint}/v1/traces"))
        p = LeanTracerProvider(RESOURCE, batcher)
        tracer = p.get_tracer("t")
        for i in range(3):
            tracer.start_span(f"s{i}").end()
        otlp.wait_for(lambda: len(otlp.spans) == 3, timeout=10)  # a full batch wakes the thread
        tracer.start_span("last").end()
        assert p.force_flush(5000)
        assert [s.name for s in otlp.spans] == ["s0", "s1", "s2", "last"] and otlp.posts == ["/v1/traces"] * 2
        assert {s.service for s in otlp.spans} == {"lean"}

    class Stuck:
        """An exporter that does not come back until told: the queue fills behind it."""

        def __init__(self) -> None:
            self.go, self.got = threading.Event(), []

        def export(self, spans: list[LeanSpan]) -> None:
            self.go.wait(10)
            self.got += [s.name for s in spans]

        def shutdown(self) -> None:
            pass

    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "4")
    stuck = Stuck()
    batcher = BatchExport(stuck)
    tracer = LeanTracerProvider(RESOURCE, batcher).get_tracer("t")
    for i in range(3):  # a full batch: the thread takes it and sticks in export
        tracer.start_span(f"a{i}").end()
    for _ in range(200):
        if not batcher._queue:
            break
        threading.Event().wait(0.01)
    for i in range(6):  # 4 fit in the queue, 2 are dropped
        tracer.start_span(f"b{i}").end()
    assert batcher.dropped == 2
    stuck.go.set()
    batcher.shutdown()
    assert stuck.got == ["a0", "a1", "a2", "b0", "b1", "b2", "b3"]


@pytest.mark.parametrize("exporters, lean", [("otlp", True), ("none", True), ("otlp,none", True), ("console", False),
                                             ("otlp,console", False), ("otlp_proto_http", False)])
def test_mcpkit_makes_the_lean_provider_for_its_own_exporter_or_none(monkeypatch: pytest.MonkeyPatch, exporters: str,
                                                                     lean: bool) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    from mcpkit.server.tracing import new_provider

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", exporters)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    made = new_provider("svc")
    assert isinstance(made, LeanTracerProvider if lean else TracerProvider)
    if lean:
        assert made.resource.attributes["service.name"] == "svc"
        assert isinstance(made.processor, Discard if exporters == "none" else BatchExport)


def test_the_server_span_is_current_for_spans_started_inside_it() -> None:
    """The request's SERVER span (tracing.TracingObserver) on the lean provider: a span a tool
    starts meanwhile is its child, and the span carries the conventions' attributes."""
    from mcpkit.protocol.jsonrpc import Answer
    from mcpkit.server.observe import RequestRecord
    from mcpkit.server.tracing import TracingObserver

    p, kept = provider()
    obs = TracingObserver(p)
    carrier: dict[str, str] = {}
    propagate.inject(carrier, under(REMOTE))
    rec = RequestRecord("tools/call", 5, "http", None, "2026-07-28", "greet", dict(carrier), {}, "c")
    with obs.request(rec):
        p.get_tracer("tool").start_span("inside").end()
        rec.finish(Answer(5, {"content": [], "isError": True}))
    inside, server = kept.spans
    assert server.name == "tools/call greet" and server.kind is SpanKind.SERVER and server.parent.span_id == REMOTE.span_id
    assert inside.parent == server.context and inside.context.trace_id == REMOTE.trace_id
    assert server.attributes["gen_ai.tool.name"] == "greet" and server.attributes["error.type"] == "tool_error"
    assert server.attributes["jsonrpc.request.id"] == "5" and server.status.status_code is StatusCode.ERROR


@pytest.mark.parametrize("path", ["own", "api"])
def test_the_server_span_continues_the_current_context_and_restores_it(path: str) -> None:
    """With the lean tracer the SERVER span sets the API's context variable itself ("own");
    through the API ("api", any other runtime context) the result must be the same: a span
    current before the request is its parent, the context's other values stay visible inside,
    and the context before is current again after."""
    from mcpkit.protocol.jsonrpc import Answer
    from mcpkit.server.observe import RequestRecord
    from mcpkit.server.tracing import TracingObserver

    p, kept = provider()
    obs = TracingObserver(p)
    assert obs._var is not None  # the API's default runtime context: the own path is the one taken
    if path == "api":
        obs._var = None
    outer = p.get_tracer("outer").start_span("outer")
    key = context.create_key("kept-value")
    token = context.attach(context.set_value(key, "here", trace.set_span_in_context(outer)))
    try:
        before = context.get_current()
        rec = RequestRecord("tools/call", 9, "stdio", None, "2026-07-28", "greet", None, None, "c")
        with obs.request(rec) as server:
            assert trace.get_current_span() is server and context.get_value(key) == "here"
            rec.finish(Answer(9, {"content": [], "isError": False}))
        assert context.get_current() is before and trace.get_current_span() is outer
    finally:
        context.detach(token)
    (ended,) = kept.spans
    assert ended is server and server.parent == outer.get_span_context()
    assert server.context.trace_id == outer.get_span_context().trace_id


def test_span_contexts_are_what_the_api_would_make() -> None:
    """The lean tracer builds its SpanContext tuples directly: they must equal the API's own."""
    p, _ = provider()
    tracer = p.get_tracer("t")
    for ctx in (None, under(REMOTE)):
        for sampler in ("always_on", "always_off"):
            p.sampler = sampler_from_env(sampler)
            c = tracer.start_span("s", ctx).get_span_context()
            made = SpanContext(c.trace_id, c.span_id, c.is_remote, c.trace_flags, c.trace_state)
            assert tuple(c) == tuple(made) and c.is_valid and not c.is_remote
            assert c.trace_state == (REMOTE.trace_state if ctx is not None else TraceState())


def test_an_unsampled_server_span_is_only_a_context() -> None:
    """Unsampled, the request's SERVER span is the API's non-recording span (no attributes
    made, nothing ended into the processor), yet current: a tool's span inside is its child
    and unsampled too."""
    from mcpkit.protocol.jsonrpc import Answer
    from mcpkit.server.observe import RequestRecord
    from mcpkit.server.tracing import TracingObserver

    p, kept = provider("always_off")
    obs = TracingObserver(p)
    rec = RequestRecord("tools/call", 5, "http", None, "2026-07-28", "greet", None, {}, "c")
    with obs.request(rec) as server:
        assert isinstance(server, NonRecordingSpan) and trace.get_current_span() is server
        inside = p.get_tracer("tool").start_span("inside")
        rec.finish(Answer(5, {"content": [], "isError": True}))
    assert inside.get_span_context().trace_id == server.get_span_context().trace_id and not inside.is_recording()
    assert kept.spans == [] and trace.get_current_span() is not server


def test_the_server_span_takes_its_own_attributes_unchecked_only_within_the_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SERVER span's attributes (all strings, made by tracing.py) skip the per-value check,
    but never the limits: with a value length limit they are cut, with a count limit the
    rest is dropped and counted, as for any span; without either the dict is kept as made."""
    from mcpkit.protocol.jsonrpc import Answer
    from mcpkit.server.observe import RequestRecord
    from mcpkit.server.tracing import TracingObserver

    def server_span(**env: str) -> LeanSpan:
        for name in ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        p, kept = provider(limits=Limits())
        rec = RequestRecord("tools/call", 77, "http", "sess-1", "2026-07-28", "greet", None, {}, "c")
        with TracingObserver(p).request(rec):
            rec.finish(Answer(77, {"content": [], "isError": False}))
        (span,) = kept.spans
        return span

    whole = server_span()
    assert whole.attributes["mcp.session.id"] == "sess-1" and whole.attributes["mcp.method.name"] == "tools/call"
    assert whole.dropped_attributes == 0 and len(whole.attributes) == 8
    cut = server_span(OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT="4")
    assert cut.attributes["mcp.method.name"] == "tool" and cut.attributes["gen_ai.tool.name"] == "gree"
    few = server_span(OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT="3")
    assert len(few.attributes) == 3 and few.dropped_attributes == 5


def test_the_per_request_server_span_has_every_field_recorded_gives() -> None:
    """LeanTracer.server_span sets LeanSpan's fields itself (no __init__ call a request): the
    span it makes is the one recorded makes, field for field (a field added to LeanSpan and
    not there fails here)."""
    p, _ = provider()
    tracer = p.get_tracer("mcpkit")
    parent, ctx = tracer.decide_under(REMOTE)
    stock = (1, b"kept", None)
    fast = tracer.server_span("tools/call greet", ctx, parent, SpanKind.SERVER, {"a": "b"}, None, stock)
    slow = tracer.recorded("tools/call greet", ctx, parent, SpanKind.SERVER, {"a": "b"}, None, plain=True, stock=stock)
    for field in LeanSpan.__slots__:
        if field != "start_time":
            assert getattr(fast, field) == getattr(slow, field), field
    assert abs(fast.start_time - slow.start_time) < 10**9


def test_values_that_differ_every_time_encode_as_the_reference_writes_them() -> None:
    """Past the values kept per key, a string value (a request id) is written after the kept
    bytes for its length: short, long (a two-byte length) and non-ASCII ones as the reference
    encoder writes them, over more spans than any cache holds."""
    p, kept = provider("always_on")
    tracer = p.get_tracer("mcpkit", "0.1.0")
    ids = [str(i) for i in range(150)] + ["é" * 70, "x" * 200, "", "日本" * 30]
    for rid in ids:
        tracer.start_span("tools/call greet", kind=SpanKind.SERVER,
                          attributes={"mcp.method.name": "tools/call", "jsonrpc.request.id": rid}).end()
    encoder = _Encoder()
    for _ in range(2):  # the second time every head is kept already
        ours = parsed(encoder.request(kept.spans))
        reference = parsed(encode_spans(kept.spans).SerializeToString())
        assert ours == reference
    got = [sp.attributes[1].value.string_value for sp in ours.resource_spans[0].scope_spans[0].spans]
    assert got == ids


def test_every_observer_sees_the_params_a_server_request_is_sent_with() -> None:
    """Observers.asking with several members: each gets the params the one before it left (the
    tracer's context in ``_meta``), and the tracer's CLIENT span ends with the request."""
    import contextlib

    from mcpkit.server.observe import Observer, Observers
    from mcpkit.server.tracing import TracingObserver

    p, kept = provider()
    seen: list[dict[str, Any]] = []

    class Seen(Observer):
        @contextlib.contextmanager
        def asking(self, method: str, params: dict[str, Any], transport: str, session_id: str | None) -> Any:
            seen.append(params)
            yield params

    watching = Observers()
    watching.add(TracingObserver(p))
    watching.add(Seen())
    given = {"messages": [], "_meta": {"progressToken": 3}}
    with watching.asking("sampling/createMessage", given, "stdio", None) as sent:
        assert seen == [sent] and sent["_meta"]["progressToken"] == 3 and "traceparent" in sent["_meta"]
        assert kept.spans == []
    (span,) = kept.spans
    assert (span.name, span.kind) == ("sampling/createMessage", SpanKind.CLIENT)
    assert sent["_meta"]["traceparent"] == f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-01"
    assert given == {"messages": [], "_meta": {"progressToken": 3}}  # the caller's params untouched


def test_server_spans_of_one_kind_share_their_attribute_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests of one kind (method, target, transport, session, version) share the SERVER
    span's name, attributes and the OTLP bytes of both (the span's ``stock``); each span has its
    own copy of the attributes, a span whose attributes or name change after it began is encoded
    field by field, every span encodes as the reference writes it, and the kinds kept
    stay bounded."""
    from mcpkit.protocol.jsonrpc import Answer
    from mcpkit.server import tracing
    from mcpkit.server.observe import RequestRecord
    from mcpkit.server.tracing import TracingObserver

    p, kept = provider()
    obs = TracingObserver(p)

    def serve(rid: Any, method: str = "tools/call", target: str | None = "greet", session: str | None = None,
              change: Any = None, error: bool = False, meta: dict[str, Any] | None = None) -> LeanSpan:
        rec = RequestRecord(method, rid, "http", session, "2026-07-28", target, meta, {}, "c")
        with obs.request(rec):
            if change is not None:
                change(trace.get_current_span())
            result = {"content": [], "isError": error}
            rec.finish(Answer(rid, result))
        return kept.spans[-1]

    first, second = serve(1), serve(2)
    assert first.stock is not None and first.stock is second.stock and first.stock[0] == 6
    assert first.attributes is not second.attributes
    assert (first.attributes["jsonrpc.request.id"], second.attributes["jsonrpc.request.id"]) == ("1", "2")
    renamed = serve(3, change=lambda span: span.set_attribute("gen_ai.tool.name", "renamed"))
    added = serve(4, change=lambda span: span.set_attributes({"extra": 5}))
    failed = serve(5, error=True)
    moved = serve(55, change=lambda span: span.update_name("tools/call elsewhere"))
    assert renamed.stock is added.stock is failed.stock is moved.stock is None
    assert renamed.attributes["gen_ai.tool.name"] == "renamed" and failed.attributes["error.type"] == "tool_error"
    later = serve(6)  # the kind's shared name and attributes were not touched by the spans before
    assert later.attributes["gen_ai.tool.name"] == "greet" and "extra" not in later.attributes
    assert (later.name, moved.name) == ("tools/call greet", "tools/call elsewhere")
    others = [serve(7, "prompts/get", "draft", "s-1"), serve(8, "resources/read", "file:///a", "s-1"), serve(9, "ping", None)]
    assert [s.name for s in others] == ["prompts/get draft", "resources/read", "ping"]
    assert others[1].attributes["mcp.resource.uri"] == "file:///a" and others[1].attributes["mcp.session.id"] == "s-1"
    # spans the exporter writes from their kept bytes (a parent, a long or absent request id) and
    # ones it writes field by field though they keep them (a status, an event, a trace state)
    parent = f"00-{'ab' * 16}-{'cd' * 8}-01"
    others += [serve(10, meta={"traceparent": parent}), serve("r" * 300), serve(None),
               serve(11, change=lambda span: span.set_status(StatusCode.ERROR, "told")),
               serve(12, change=lambda span: span.add_event("seen")),
               serve(13, meta={"traceparent": parent, "tracestate": "k=v"})]
    assert all(s.stock is not None for s in others[3:]) and others[3].parent.span_id == 0xCDCDCDCDCDCDCDCD
    assert "jsonrpc.request.id" not in others[5].attributes and others[-1].context.trace_state.get("k") == "v"
    encoder = _Encoder()
    for _ in range(2):  # the second time with the encoder's own caches warm
        assert parsed(encoder.request(kept.spans)) == parsed(encode_spans(kept.spans).SerializeToString())
    # as the batch processor keeps them: records for the spans as they began, objects for the rest
    records = [record(s) for s in kept.spans]
    assert [type(r) is tuple for r in records] == [True] * 2 + [False] * 4 + [True] * 7 + [False] * 3
    assert parsed(encoder.request(records)) == parsed(encode_spans(kept.spans).SerializeToString())
    own = p.get_tracer("plugin.scope").start_span("own")  # another scope in the same batch, between records
    own.end()
    mixed = [*records[:3], own, *records[3:]]
    assert parsed(encoder.request(mixed)) == parsed(encode_spans([*kept.spans[:3], own, *kept.spans[3:-1]]).SerializeToString())

    monkeypatch.setattr(tracing, "_KINDS_MAX", 4)
    for i in range(10):  # a new session is a new kind: at most _KINDS_MAX are kept
        span = serve(100 + i, session=f"s-{i}")
        assert len(obs._kinds) <= 4 and span.attributes["mcp.session.id"] == f"s-{i}"
    assert parsed(encoder.request(kept.spans[-10:])) == parsed(encode_spans(kept.spans[-10:]).SerializeToString())

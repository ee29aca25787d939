"""Traces: a span per request on the OpenTelemetry API, as the OpenTelemetry semantic conventions
for MCP describe them (gen-ai/mcp.md), exported over OTLP/HTTP.

``traces = true`` (``--traces``, ``MCPKIT_TRACES=1``) installs a :class:`TracingObserver` in the
app's observers while the plugins' lifespans are open (:func:`traced`), in every process that
serves (each ``--workers`` process exports its own spans). Off, nothing here is imported.

- one SERVER span per request or notification, named ``{mcp.method.name} {target}`` (the tool or
  prompt name; a resource URI only as ``mcp.resource.uri``, never in the name), current while its
  handler runs, so spans started inside (a tool's own, the client library's CLIENT span when a
  gateway forwards the call) are its children;
- its parent is the context in ``params._meta`` (``traceparent``/``tracestate``/``baggage``, with
  the configured propagators), else in the HTTP request's headers; when both are there the HTTP
  one becomes a link (the conventions: MCP and transport contexts are independent);
- an INTERNAL span for each middleware the request passes through.

The process's tracer provider is used when the application (or ``opentelemetry-instrument``)
set one; otherwise one is made from the standard ``OTEL_*`` variables: ``OTEL_SERVICE_NAME``
(default: the server's ``name``), ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_EXPORTER`` (``otlp``,
the default: mcpkit's own OTLP/HTTP protobuf exporter, :mod:`.otlp_export`; ``otlp_proto_http``,
the OpenTelemetry package's, when installed; ``console`` — on stderr, stdio's stdout stays the
protocol's — or ``none``),
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``…_HEADERS``,
``…_TIMEOUT``, ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``; its spans are flushed when serving ends.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any, AsyncIterator, Iterator, Sequence

import trio

from .._extras import require
from .._version import __version__
from .errors import StartupError
from .observe import NETWORK_TRANSPORT, Observer, RequestRecord

log = logging.getLogger("mcpkit.server")

#: the setting as the missing-extra line names it
SETTING = "traces = true (--traces)"
#: methods whose target (params.name) goes into the span name, and the attribute that holds it
_NAMED = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}
#: seconds the spans still waiting may take to export when serving ends
FLUSH_S = 5.0
#: kinds of request whose span name and attributes are kept (TracingObserver.kind)
_KINDS_MAX = 1024
#: a span with no context to continue and no links
_NO_PARENT: tuple[None, tuple[()]] = (None, ())
_new_server_span = object.__new__


def need_otel() -> None:
    """Refuse ``traces = true`` in one line when the otel extra is not installed."""
    require("otel", SETTING)


class TracingObserver(Observer):
    """Turns what the server reports into spans (see the module's docstring)."""

    def __init__(self, tracer_provider: Any = None) -> None:
        from opentelemetry import context, propagate, trace
        from opentelemetry.trace import Link, SpanKind, Status, StatusCode

        provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        self.tracer = provider.get_tracer("mcpkit", __version__)
        self._context, self._propagate, self._trace = context, propagate, trace
        self._Link, self._Status, self._ERROR = Link, Status, StatusCode.ERROR
        self._SERVER, self._INTERNAL, self._CLIENT = SpanKind.SERVER, SpanKind.INTERNAL, SpanKind.CLIENT
        self._fields: tuple[Any, frozenset[str]] = (None, frozenset())
        from .otlp_export import heads_of, span_stock

        #: per kind of request (method, target, transport, session, version): see :meth:`kind`
        self._kinds: dict[tuple[Any, ...], tuple[str, dict[str, Any], tuple[int, bytes, Any]]] = {}
        self._stock_of = span_stock
        from .lean_trace import LeanTracer

        #: mcpkit's lean tracer: the SERVER span's sampling decided before its attributes are made
        self._lean: Any = self.tracer if isinstance(self.tracer, LeanTracer) else None
        #: the lean tracer's resource and scope, encoded: with them in the stock, its SERVER spans
        #: wait for export as records (otlp_export.record)
        self._heads = heads_of(self._lean.provider.resource, self._lean.scope) if self._lean is not None else None
        self._unrecorded = trace.NonRecordingSpan
        #: with the lean tracer and the API's default runtime context (a ContextVar holding a
        #: Context), the SERVER span reads and sets that variable itself: the same contexts the
        #: API's get_current_span / set_span_in_context / attach / detach make, without their
        #: layers of calls. None: through the API.
        self._var: Any = None
        from opentelemetry.context.context import Context
        from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
        from opentelemetry.trace.propagation import _SPAN_KEY

        runtime = getattr(context, "_RUNTIME_CONTEXT", None)
        if self._lean is not None and type(runtime) is ContextVarsRuntimeContext:
            self._var = runtime._current_context
        self._Context, self._SPAN_KEY, self._Span = Context, _SPAN_KEY, trace.Span

    # -- requests ------------------------------------------------------------------------------
    def request(self, rec: RequestRecord) -> "_ServerSpan":
        server = _new_server_span(_ServerSpan)  # its two fields set here: no __init__ frame a request
        server.obs, server.rec = self, rec
        return server

    def parent(self, meta: dict[str, Any] | None, headers: dict[str, str] | None) -> tuple[Any, Sequence[Any]]:
        """The context a span continues, and its links: ``params._meta`` first, the HTTP
        headers next (a link when both carry one)."""
        propagator = self._propagate.get_global_textmap()
        if propagator is not self._fields[0]:  # the keys it reads, worked out once per propagator
            self._fields = (propagator, frozenset(propagator.fields))
        fields = self._fields[1]
        in_meta = meta is not None and not fields.isdisjoint(meta)
        in_headers = headers is not None and not fields.isdisjoint(headers)
        if in_meta:
            ctx = propagator.extract(meta)
            if not in_headers:
                return ctx, ()
            remote = self._trace.get_current_span(propagator.extract(headers)).get_span_context()
            mine = self._trace.get_current_span(ctx).get_span_context()
            links = [self._Link(remote)] if remote.is_valid and remote.span_id != mine.span_id else []
            return ctx, links
        if in_headers:
            return propagator.extract(headers), ()
        return _NO_PARENT  # the usual case: one shared answer, nothing made

    def attributes(self, method: str, transport: str, session_id: str | None, version: str | None) -> dict[str, Any]:
        attrs: dict[str, Any] = {"mcp.method.name": method, "network.transport": NETWORK_TRANSPORT.get(transport, transport)}
        if transport != "stdio":
            attrs["network.protocol.name"] = "http"
        if session_id:
            attrs["mcp.session.id"] = session_id
        if version:
            attrs["mcp.protocol.version"] = version
        return attrs

    def kind(self, method: str, target: str | None, transport: str, session_id: str | None,
             version: str | None) -> tuple[str, dict[str, Any], tuple[int, bytes, Any]]:
        """The name, the attributes and their OTLP bytes (the name's too) every request of one kind shares
        (kept: at most _KINDS_MAX kinds; more, and they are made again)."""
        attrs = self.attributes(method, transport, session_id, version)
        name = method
        if target is not None:
            key = _NAMED.get(method)
            if key is not None:
                name = f"{method} {target}"
                attrs[key] = target
                if key == "gen_ai.tool.name":
                    attrs["gen_ai.operation.name"] = "execute_tool"
            elif method.startswith("resources/"):
                attrs["mcp.resource.uri"] = target
        if len(self._kinds) >= _KINDS_MAX:
            self._kinds.clear()
        known = self._kinds[(method, target, transport, session_id, version)] = (name, attrs, self._stock_of(name, self._SERVER, attrs, self._heads))
        return known

    # -- notifications, middleware -------------------------------------------------------------
    def notification(self, method: str, transport: str, session_id: str | None, meta: dict[str, Any] | None) -> None:
        ctx, links = self.parent(meta, None)
        self.tracer.start_span(method, ctx, self._SERVER, self.attributes(method, transport, session_id, None), links).end()

    @contextlib.contextmanager
    def asking(self, method: str, params: dict[str, Any], transport: str, session_id: str | None) -> Iterator[dict[str, Any]]:
        """A CLIENT span around a server-to-client request (a child of the request's SERVER span
        that asks), its context written into the sent request's ``params._meta``."""
        attrs = self.attributes(method, transport, session_id, None)
        with self.tracer.start_as_current_span(method, kind=self._CLIENT, attributes=attrs) as span:
            meta = params.get("_meta")
            carrier: dict[str, Any] = dict(meta) if isinstance(meta, dict) else {}
            self._propagate.inject(carrier)
            try:
                yield {**params, "_meta": carrier} if carrier else params
            except Exception as exc:
                span.set_attribute("error.type", type(exc).__qualname__)
                raise

    def middleware(self, mw: Any, call: Any) -> Any:
        attrs = {"mcpkit.middleware.name": mw.name, "mcp.method.name": call.method}
        if mw.plugin:
            attrs["mcpkit.plugin.name"] = mw.plugin
        return self.tracer.start_as_current_span(f"middleware {mw.name}", kind=self._INTERNAL, attributes=attrs)


class _ServerSpan:
    """The SERVER span of one request, current (contextvars) while the request is served."""

    __slots__ = ("obs", "rec", "span", "token", "recording")
    obs: TracingObserver  # set by TracingObserver.request
    rec: RequestRecord

    def __enter__(self) -> Any:
        obs, rec = self.obs, self.rec
        meta, headers = rec.meta, rec.headers
        fields = obs._fields
        # the usual request carries no context: parent()'s answer without its call (the fields
        # checked against the propagator's, as parent() keeps them)
        if (fields[0] is obs._propagate.get_global_textmap() and (meta is None or fields[1].isdisjoint(meta))
                and (headers is None or fields[1].isdisjoint(headers))):
            ctx, links = _NO_PARENT
        else:
            ctx, links = obs.parent(meta, headers)
        lean, var = obs._lean, obs._var
        if lean is None:
            sc = None
        else:  # sampled or not first: an unsampled request makes no attributes, no span object
            if var is not None:  # the API's default runtime context: its variable read directly
                base = var.get() if ctx is None else ctx
                current = base.get(obs._SPAN_KEY)
                parent, sc = lean.decide_under(None if current is None or not isinstance(current, obs._Span)
                                                else current.get_span_context())
            else:
                parent, sc = lean.decide(ctx)
        if sc is None or sc[3] & 1:  # a span to record (sampled: its trace flags), or the tracer's to decide
            # its name and attributes (strings only: the lean tracer takes them unchecked), and the
            # OTLP bytes of its name and of all its attributes but the request id: kept per kind of request
            kind = (rec.method, rec.target, rec.transport, rec.session_id, rec.protocol_version)
            known = obs._kinds.get(kind)
            if known is None:
                known = obs.kind(*kind)
            name, shared, stock = known
            attrs = shared.copy()
            if rec.request_id is not None:  # last: the kept bytes are those of the attributes before it
                attrs["jsonrpc.request.id"] = str(rec.request_id)
            if sc is None:
                span = obs.tracer.start_span(name, ctx, obs._SERVER, attrs, links)
                self.recording = span.is_recording()
            else:
                span = lean.server_span(name, sc, parent, obs._SERVER, attrs, links, stock)
                self.recording = True
        else:
            span = obs._unrecorded(sc)
            self.recording = False
        self.span = span
        if var is not None:  # the same Context set_span_in_context makes, set as attach would
            self.token = var.set(obs._Context({**base, obs._SPAN_KEY: span}))
        else:
            self.token = obs._context.attach(obs._trace.set_span_in_context(span, ctx))
        return span

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        obs, rec, span = self.obs, self.rec, self.span
        if obs._var is None:
            obs._context.detach(self.token)
        else:
            try:
                obs._var.reset(self.token)
            except ValueError:  # not the context it was set in: logged, as the API's detach does
                log.exception("traces: the context before the request's span could not be restored")
        if not self.recording:  # unsampled: nothing to record
            return
        error = rec.error_type
        if not rec.duration:  # left before it was answered: cancelled, or a bug
            error = "cancelled" if kind is None or issubclass(kind, trio.Cancelled) else kind.__qualname__
        if error is not None:
            span.set_attribute("error.type", error)
            if rec.status_code is not None:
                span.set_attribute("rpc.response.status_code", str(rec.status_code))
            span.set_status(obs._Status(obs._ERROR, rec.error_message))
        span.end()


# -- setting it up ---------------------------------------------------------------------------------
def tracer_provider(service_name: str) -> tuple[Any, bool]:
    """The process's tracer provider, and whether it was made here (and is flushed here): the
    one already set, else one made from the ``OTEL_*`` variables: mcpkit's lean provider
    (:mod:`.lean_trace`) for the ``otlp`` and ``none`` exporters, the SDK's for the others."""
    from opentelemetry import trace

    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):
        return current, False
    provider = new_provider(service_name)
    trace.set_tracer_provider(provider)  # a tool's own spans and the client library's go there too
    return provider, True


def new_provider(service_name: str) -> Any:
    """A tracer provider as the ``OTEL_*`` variables say (not made the process's)."""
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service_name}))
    names = _exporter_names()
    provider: Any
    if set(names) <= {"otlp", "none"}:  # mcpkit's own exporter or none: mcpkit's lean spans (lean_trace.py)
        from .lean_trace import LeanTracerProvider
        from .span_batching import BatchExport, Discard

        exporters = _exporters(names)
        provider = LeanTracerProvider(resource, BatchExport(exporters[0]) if exporters else Discard())
    else:  # console, the package's OTLP exporter: the SDK's provider and batch processor
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider(resource=resource)
        for exporter in _exporters(names):
            provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _exporter_names() -> list[str]:
    names = [n.strip().lower() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    return list(dict.fromkeys(names))  # each once


def _exporters(names: list[str]) -> list[Any]:
    out: list[Any] = []
    for name in names:
        if name == "none":
            continue
        if name == "console":  # never stdout: on stdio that is the protocol's
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            out.append(ConsoleSpanExporter(out=sys.stderr))
        elif name == "otlp":
            protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
            if protocol.strip() != "http/protobuf":
                raise StartupError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: traces are exported over OTLP/HTTP (http/protobuf) only")
            from .otlp_export import OtlpHttpSpanExporter

            try:
                out.append(OtlpHttpSpanExporter())
            except ValueError as exc:
                raise StartupError(str(exc)) from None
        elif name == "otlp_proto_http":  # the OpenTelemetry package's exporter (slower), if installed
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            except ImportError:
                raise StartupError("OTEL_TRACES_EXPORTER=otlp_proto_http needs opentelemetry-exporter-otlp-proto-http "
                                   "(or use otlp, mcpkit's own OTLP/HTTP exporter)") from None
            out.append(OTLPSpanExporter())
        else:
            raise StartupError(f"OTEL_TRACES_EXPORTER={name}: traces are exported with otlp, otlp_proto_http, console or none")
    return out


@contextlib.asynccontextmanager
async def traced(app: Any) -> AsyncIterator[TracingObserver]:
    """Spans for what ``app`` serves while open; the spans still waiting are exported at the end."""
    need_otel()
    provider, own = tracer_provider(app.settings.name)
    observer = TracingObserver(provider)
    app.observers.add(observer)
    try:
        yield observer
    finally:
        if observer in app.observers.members:
            app.observers.members.remove(observer)
        if own:  # flushed, not shut down: a worker leaves with os._exit (no atexit), and a
            # later server in this process (tests) goes on with the same global provider
            with trio.CancelScope(shield=True), trio.move_on_after(FLUSH_S + 1):
                await trio.to_thread.run_sync(provider.force_flush, int(FLUSH_S * 1000), abandon_on_cancel=True)


__all__ = ["SETTING", "TracingObserver", "need_otel", "traced", "tracer_provider"]

"""A lean recording tracer on the OpenTelemetry API, used when mcpkit makes the tracer provider
itself (no provider set by the application) and spans go to mcpkit's OTLP exporter or nowhere.

The SDK's span is general: a sampler object per span, ``BoundedAttributes`` cleaning every
value, a lock per span, a ``ReadableSpan`` copy at the end, a batch processor that wakes its
thread per span. Here a span is a slotted object that keeps its attributes as given (only the
value types OTLP carries are accepted; count and length limits from the standard variables),
the sampler is a function of the parent and the trace id, and ended spans go to a bounded
queue (span_batching.py) that a background thread takes in batches and hands to
:class:`~mcpkit.server.otlp_export.OtlpHttpSpanExporter`, which encodes them straight from these
objects. Everything implements the OpenTelemetry API classes, so a tool's own
``trace.get_tracer(...).start_as_current_span`` spans and the client library's CLIENT spans are
recorded in the same trace as the request's SERVER span.

Variables read: ``OTEL_TRACES_SAMPLER`` (``parentbased_always_on``, the default;
``always_on``, ``always_off``, ``traceidratio``, ``parentbased_always_off``,
``parentbased_traceidratio``), ``OTEL_TRACES_SAMPLER_ARG``,
``OTEL_[SPAN_]ATTRIBUTE_COUNT_LIMIT``, ``OTEL_[SPAN_]ATTRIBUTE_VALUE_LENGTH_LIMIT``,
``OTEL_SPAN_EVENT_COUNT_LIMIT``, ``OTEL_SPAN_LINK_COUNT_LIMIT``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
import traceback
from typing import Any, Callable, Iterator, Sequence

from opentelemetry import trace
from opentelemetry.trace import (DEFAULT_TRACE_STATE, Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode,
                                 TraceFlags, use_span)

from .otlp_export import _PLAIN, UNSET_STATUS as _UNSET

log = logging.getLogger("mcpkit.server")

_SAMPLED, _UNSAMPLED = TraceFlags(TraceFlags.SAMPLED), TraceFlags(TraceFlags.DEFAULT)
_SCALAR = (str, bool, int, float)
_SCALARS = frozenset(_SCALAR)
_MASK64 = (1 << 64) - 1
_context = tuple.__new__
#: a sampler: (the parent's span context or None, the trace id) -> record and export?
Sampler = Callable[[Any, int], bool]


# -- samplers --------------------------------------------------------------------------------------
def _ratio(rate: float) -> Sampler:
    """The SDK's TraceIdRatioBased rule: the low 64 bits of the trace id under rate * 2**64."""
    bound = round(max(0.0, min(1.0, rate)) * (1 << 64))
    return lambda parent, trace_id: (trace_id & _MASK64) < bound


def _always_on(parent: Any, trace_id: int) -> bool:
    return True


def _always_off(parent: Any, trace_id: int) -> bool:
    return False


def _parent_based_always_on(parent: Any, trace_id: int) -> bool:
    """The default sampler (LeanTracer.decide_under applies it inline, without this call)."""
    return parent is None or bool(parent[3] & 1)


def _parent_based(root: Sampler) -> Sampler:
    """A child follows its parent's sampled flag (remote or local); a root asks ``root``."""
    if root is _always_on:  # the default sampler: one call a span, not two
        return _parent_based_always_on

    def sample(parent: Any, trace_id: int) -> bool:
        if parent is not None:
            return bool(parent[3] & 1)  # its trace flags
        return root(parent, trace_id)
    return sample


def sampler_from_env(name: str | None = None, arg: str | None = None) -> Sampler:
    """The sampler ``OTEL_TRACES_SAMPLER`` / ``OTEL_TRACES_SAMPLER_ARG`` name (as the SDK reads
    them: an unknown name is the default, a bad ratio is 1.0)."""
    name = (name if name is not None else os.environ.get("OTEL_TRACES_SAMPLER", "")).strip().lower() or "parentbased_always_on"
    arg = arg if arg is not None else os.environ.get("OTEL_TRACES_SAMPLER_ARG")
    rate = 1.0
    if "traceidratio" in name:
        try:
            rate = float(arg) if arg not in (None, "") else 1.0
            if not 0.0 <= rate <= 1.0:
                raise ValueError(rate)
        except ValueError:
            log.warning("OTEL_TRACES_SAMPLER_ARG=%r: a ratio between 0 and 1 is needed; sampling everything", arg)
            rate = 1.0
    roots = {"always_on": _always_on, "always_off": _always_off, "traceidratio": _ratio(rate)}
    if name in roots:
        return roots[name]
    if name.startswith("parentbased_") and name[12:] in roots:
        return _parent_based(roots[name[12:]])
    log.warning("OTEL_TRACES_SAMPLER=%s is not known here; using parentbased_always_on", name)
    return _parent_based(_always_on)


# -- limits ---------------------------------------------------------------------------------------
def _env_int(*names: str, default: int | None) -> int | None:
    for n in names:
        v = os.environ.get(n, "").strip()
        if v:
            try:
                return max(0, int(v))
            except ValueError:
                log.warning("%s=%r is not a whole number; using %s", n, v, default)
    return default


class Limits:
    """How many attributes, events and links a span keeps, and how long a string value may be."""

    __slots__ = ("attributes", "length", "events", "links")

    def __init__(self) -> None:
        self.attributes = _env_int("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT", default=128) or 0
        self.length = _env_int("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", default=None)
        self.events = _env_int("OTEL_SPAN_EVENT_COUNT_LIMIT", default=128) or 0
        self.links = _env_int("OTEL_SPAN_LINK_COUNT_LIMIT", default=128) or 0


def _valid(value: Any, length: int | None) -> Any:
    """``value`` as OTLP can carry it (truncated to ``length``), or None when it cannot."""
    t = type(value)
    if t in _SCALARS:
        return value[:length] if length is not None and t is str else value
    if isinstance(value, str):  # a subclass (a str enum …): its plain value
        return _valid(str.__str__(value), length)
    if isinstance(value, (int, float)):
        return _valid(int(value) if isinstance(value, int) else float(value), length)
    if isinstance(value, (list, tuple)):
        kinds = {type(x) for x in value if x is not None}
        if len(kinds) > 1 or not kinds <= _SCALARS:  # one scalar type per sequence, as OTLP arrays go
            return None
        if length is not None and kinds == {str}:
            return tuple(x[:length] if x is not None else None for x in value)
        return tuple(value)
    return None


def _put(span: "LeanSpan", attrs: Any, key: str, value: Any) -> None:
    """One attribute into ``attrs`` under the span's limits."""
    v = _valid(value, span._limits.length)
    if v is None or not isinstance(key, str) or not key:
        log.warning("span %r: attribute %r dropped: %s is not a value OTLP carries", span.name, key, type(value).__name__)
        return
    if key not in attrs and len(attrs) >= span._limits.attributes:
        span.dropped_attributes += 1
        return
    attrs[key] = v


def _attributes(span: "LeanSpan", given: Any, copy: bool = True) -> dict[str, Any]:
    """A checked copy of ``given`` (``given`` itself when not ``copy`` and nothing needs
    changing); the fast path is a dict of plain scalars under the limits."""
    limits = span._limits
    if limits.length is None and len(given) <= limits.attributes:
        for v in given.values():
            if type(v) not in _SCALARS:
                break
        else:
            return dict(given) if copy or type(given) is not dict else given
    out: dict[str, Any] = {}
    for k, v in given.items():
        _put(span, out, k, v)
    return out


# -- spans ----------------------------------------------------------------------------------------
class Scope:
    """The instrumentation scope of a tracer (what the OTLP encoder reads)."""

    __slots__ = ("name", "version", "schema_url")
    attributes = None  # a tracer's scope attributes are not exported (mcpkit's encoder writes name and version)

    def __init__(self, name: str, version: str | None, schema_url: str | None) -> None:
        self.name, self.version, self.schema_url = name, version, schema_url


class Event:
    __slots__ = ("name", "timestamp", "attributes")
    dropped_attributes = 0  # an event's attributes are checked, not limited

    def __init__(self, name: str, timestamp: int, attributes: dict[str, Any]) -> None:
        self.name, self.timestamp, self.attributes = name, timestamp, attributes


class LeanSpan(trace.Span):
    """A recording span: what OTLP needs, kept as plain fields (the encoder reads them directly)."""

    __slots__ = ("name", "context", "parent", "kind", "attributes", "events", "links", "status", "start_time",
                 "end_time", "dropped_attributes", "dropped_events", "dropped_links", "resource",
                 "instrumentation_scope", "_limits", "_processor", "stock")

    def __init__(self, name: str, context: SpanContext, parent: SpanContext | None, kind: SpanKind, tracer: "LeanTracer",
                 start_time: int | None) -> None:
        self.name, self.context, self.parent, self.kind = name, context, parent, kind
        self.attributes: dict[str, Any] = {}
        self.events: tuple[()] | list[Event] = ()  # a list at the first event: one object less a span
        self.links: tuple[Link, ...] | list[Link] = ()
        self.status = _UNSET
        #: (n, bytes, heads): the OTLP bytes of the name, the kind and the first n attributes, and
        #: of the tracer's resource and scope, made once for many spans (otlp_export.span_stock);
        #: None: none, or changed since
        self.stock: tuple[int, bytes, Any] | None = None
        self.start_time = start_time or time.time_ns()
        self.end_time: int | None = None
        self.dropped_attributes = self.dropped_events = self.dropped_links = 0
        provider = tracer.provider
        self.resource, self.instrumentation_scope = provider.resource, tracer.scope
        self._limits, self._processor = provider.limits, provider.processor

    def get_span_context(self) -> SpanContext:
        return self.context

    def is_recording(self) -> bool:
        return self.end_time is None

    def set_attribute(self, key: str, value: Any) -> None:
        if self.end_time is None:
            self.stock = None  # it may change an attribute the kept bytes hold
            _put(self, self.attributes, key, value)

    def set_attributes(self, attributes: Any) -> None:
        if self.end_time is None:
            self.stock = None
            for k, v in attributes.items():
                _put(self, self.attributes, k, v)

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        if self.end_time is not None:
            return
        if len(self.events) >= self._limits.events:
            self.dropped_events += 1
            return
        attrs: dict[str, Any] = {}
        for k, v in (attributes or {}).items():
            _put(self, attrs, k, v)
        if not self.events:
            self.events = []
        self.events.append(Event(name, timestamp or time.time_ns(), attrs))  # type: ignore[union-attr]

    def add_link(self, context: SpanContext, attributes: Any = None) -> None:
        if self.end_time is not None or not context.is_valid:
            return
        if len(self.links) >= self._limits.links:
            self.dropped_links += 1
            return
        self.links = [*self.links, Link(context, _attributes(self, attributes) if attributes else None)]

    def update_name(self, name: str) -> None:
        if self.end_time is None:
            self.name, self.stock = name, None

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """As the SDK: OK is final, UNSET changes nothing, a description only with ERROR."""
        if self.end_time is not None or self.status.status_code is StatusCode.OK:
            return
        if isinstance(status, StatusCode):
            status = Status(status, description)
        if status.status_code is not StatusCode.UNSET:
            self.status = status

    def record_exception(self, exception: BaseException, attributes: Any = None, timestamp: int | None = None,
                         escaped: bool = False) -> None:
        stack = "".join(traceback.format_exception(type(exception), exception, exception.__traceback__))
        attrs = {"exception.type": type(exception).__qualname__, "exception.message": str(exception),
                 "exception.stacktrace": stack, "exception.escaped": str(escaped)}
        if attributes:
            attrs.update(attributes)
        self.add_event("exception", attrs, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self.end_time is not None:
            log.debug("span %r ended twice", self.name)
            return
        self.end_time = end_time or time.time_ns()
        self._processor.on_end(self)

    def __repr__(self) -> str:
        return f"LeanSpan({self.name!r}, trace_id={self.context.trace_id:032x}, span_id={self.context.span_id:016x})"


_PLAIN.add(LeanSpan)  # the encoder reads its attributes dict as it is
_new_span = object.__new__


class LeanTracer(trace.Tracer):
    def __init__(self, provider: "LeanTracerProvider", scope: Scope) -> None:
        self.provider, self.scope = provider, scope

    def start_span(self, name: str, context: Any = None, kind: SpanKind = SpanKind.INTERNAL, attributes: Any = None,
                   links: Sequence[Link] | None = None, start_time: int | None = None, record_exception: bool = True,
                   set_status_on_exception: bool = True) -> trace.Span:
        parent, ctx = self.decide(context)
        if ctx[3] is _UNSAMPLED:
            return NonRecordingSpan(ctx)
        span = LeanSpan(name, ctx, parent, kind, self, start_time)
        if attributes:
            span.attributes = _attributes(span, attributes)
        if links:
            for ln in links:
                span.add_link(ln.context, ln.attributes)
        return span

    def decide(self, context: Any = None) -> tuple[SpanContext | None, SpanContext]:
        """A new span's parent (None for a root) and its own context, sampled or not (its trace
        flags): the first half of :meth:`start_span`, for a caller that builds the attributes
        of a recorded span only (the SERVER span of tracing.py)."""
        return self.decide_under(trace.get_current_span(context).get_span_context())

    def decide_under(self, parent: SpanContext | None) -> tuple[SpanContext | None, SpanContext]:
        """:meth:`decide` for a parent span context already looked up (None: a root span)."""
        # a SpanContext is the tuple (trace_id, span_id, is_remote, trace_flags, trace_state, is_valid):
        # read by index, not through its properties (a Python call each)
        if parent is not None and not parent[5]:
            parent = None
        getrandbits = random.getrandbits
        if parent is None:
            trace_id = getrandbits(128) or 1
            state = DEFAULT_TRACE_STATE
        else:
            trace_id, state = parent[0], parent[4]
        # SpanContext's own __new__ checks ids these are by construction: its tuple made directly
        sampler = self.provider.sampler
        if sampler is _parent_based_always_on:  # the default: its rule here, not a call
            flags = _SAMPLED if parent is None or parent[3] & 1 else _UNSAMPLED
        else:
            flags = _SAMPLED if sampler(parent, trace_id) else _UNSAMPLED
        return parent, _context(SpanContext, (trace_id, getrandbits(64) or 1, False, flags, state, True))

    def recorded(self, name: str, ctx: SpanContext, parent: SpanContext | None, kind: SpanKind,
                 attributes: dict[str, Any], links: Sequence[Link] | None = None, plain: bool = False,
                 stock: tuple[int, bytes, Any] | None = None) -> LeanSpan:
        """The second half: a recording span for a sampled ``ctx`` (from :meth:`decide`), taking
        ``attributes`` as it is when it is a dict of plain values within the limits (``plain``:
        the caller made it of strings only, so its values need no look; ``stock``: the OTLP bytes
        of its name and first attributes, kept by the caller, see LeanSpan.stock)."""
        span = LeanSpan(name, ctx, parent, kind, self, None)
        limits = span._limits
        if plain and limits.length is None and len(attributes) <= limits.attributes:
            span.attributes, span.stock = attributes, stock  # the caller's own dict of strings: nothing to check or cut
        else:
            span.attributes = _attributes(span, attributes, copy=False)
        if links:
            for ln in links:
                span.add_link(ln.context, ln.attributes)
        return span

    def server_span(self, name: str, ctx: SpanContext, parent: SpanContext | None, kind: SpanKind,
                    attributes: dict[str, Any], links: Sequence[Link] | None, stock: tuple[int, bytes, Any] | None) -> LeanSpan:
        """:meth:`recorded` with ``plain`` for tracing.py's SERVER span, one made per request:
        within the limits and with no links, the span's fields set here (no ``__init__`` frame,
        no keyword call); otherwise as :meth:`recorded` does it."""
        provider = self.provider
        limits = provider.limits
        if links or limits.length is not None or len(attributes) > limits.attributes:
            return self.recorded(name, ctx, parent, kind, attributes, links, plain=True, stock=stock)
        span = _new_span(LeanSpan)  # the fields LeanSpan.__init__ sets, in its order
        span.name, span.context, span.parent, span.kind = name, ctx, parent, kind
        span.attributes = attributes
        span.events = span.links = ()
        span.status = _UNSET
        span.stock = stock
        span.start_time = time.time_ns()
        span.end_time = None
        span.dropped_attributes = span.dropped_events = span.dropped_links = 0
        span.resource, span.instrumentation_scope = provider.resource, self.scope
        span._limits, span._processor = limits, provider.processor
        return span

    @contextlib.contextmanager
    def start_as_current_span(self, name: str, context: Any = None, kind: SpanKind = SpanKind.INTERNAL,
                              attributes: Any = None, links: Sequence[Link] | None = None, start_time: int | None = None,
                              record_exception: bool = True, set_status_on_exception: bool = True,
                              end_on_exit: bool = True) -> Iterator[trace.Span]:
        span = self.start_span(name, context, kind, attributes, links, start_time)
        with use_span(span, end_on_exit=end_on_exit, record_exception=record_exception,
                      set_status_on_exception=set_status_on_exception) as current:
            yield current


class LeanTracerProvider(trace.TracerProvider):
    """Tracers whose spans go to ``processor`` (a span_batching.BatchExport, or a Discard)."""

    def __init__(self, resource: Any, processor: Any, sampler: Sampler | None = None,
                 limits: Limits | None = None) -> None:
        self.resource, self.processor = resource, processor
        self.sampler = sampler or sampler_from_env()
        self.limits = limits or Limits()
        self._tracers: dict[tuple[str, str | None, str | None], LeanTracer] = {}

    def get_tracer(self, instrumenting_module_name: str, instrumenting_library_version: str | None = None,
                   schema_url: str | None = None, attributes: Any = None) -> trace.Tracer:
        key = (instrumenting_module_name or "", instrumenting_library_version, schema_url)
        tracer = self._tracers.get(key)
        if tracer is None:
            tracer = self._tracers[key] = LeanTracer(self, Scope(*key))
        return tracer

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.processor.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.processor.shutdown()


__all__ = ["LeanSpan", "LeanTracer", "LeanTracerProvider", "Limits", "sampler_from_env"]

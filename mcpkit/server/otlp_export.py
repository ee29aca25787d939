"""An OTLP/HTTP span exporter that costs little per span: the OTLP protobuf written directly
(the wire format of ``ExportTraceServiceRequest``, opentelemetry/proto/trace/v1/trace.proto),
with the resource and scope encoded once and repeated attributes (method, transport, tool
name …) encoded once, and posted with the standard library on a kept-alive connection.

The generic encoder of the OpenTelemetry exporter packages builds a protobuf object per span,
attribute and value (some 35 µs a span here, more than serving the call); this one writes the
same bytes in a fraction of that. It reads the standard variables: ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``,
``…_HEADERS``, ``…_TIMEOUT`` (seconds), ``…_COMPRESSION`` (``gzip``), ``…_CERTIFICATE``,
``…_CLIENT_KEY``, ``…_CLIENT_CERTIFICATE``; it retries 429, 502, 503, 504 and lost connections
with backoff within the timeout. Runs in the batch span processor's thread.
"""

from __future__ import annotations

import gzip
import http.client
import itertools
import logging
import os
import random
import ssl
import struct
import threading
import time
from typing import Any, Sequence
from urllib.parse import unquote, urlsplit

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import DEFAULT_TRACE_STATE as _NO_STATE_API, SpanKind, Status, StatusCode

log = logging.getLogger("mcpkit.server")

_RETRY = {429, 502, 503, 504}
#: attribute keys, and string values per key, whose encoding is kept
_CACHE_MAX = 1024
_VALUES_PER_KEY = 64
_F64 = struct.Struct("<Q").pack
_D64 = struct.Struct("<d").pack
_F32 = struct.Struct("<I").pack
#: Span.start_time_unix_nano (field 7) and end_time_unix_nano (8), fixed64 both, in one pack
_TIMES = struct.Struct("<BQBQ").pack
#: Span.kind (field 6): the API's kinds are the proto's minus one
_KIND = {k: b"\x30" + bytes((k.value + 1,)) for k in SpanKind}
_CODE = {c: c.value for c in StatusCode}
_UNSET_CODE = StatusCode.UNSET
#: the status every lean span starts with (lean_trace.py), known here by identity
UNSET_STATUS = Status(StatusCode.UNSET)
#: Span.flags (field 16, fixed32) for the trace flags, with bit 0x100 (the parent's remoteness is
#: known) and 0x200 (the parent is remote) when the key has it
_FLAGS = {f | r: _F32(0x100 | f | r) for f in range(256) for r in (0, 0x200)}
#: the end of a span whose status is unset (an empty Status field), then its flags field
_UNSET_TAIL = {f: b"\x7a\x00\x85\x01" + f for f in _FLAGS.values()}
_NO_STATE = _NO_STATE_API  # the API's empty trace state, shared by every context that has none
#: span classes whose ``attributes`` is a plain dict and that have a ``stock`` (mcpkit's lean spans
#: register theirs)
_PLAIN: set[type] = set()
#: the attribute a SERVER span adds to its kind's kept ones (tracing.py): its request id
_REQUEST_ID = "jsonrpc.request.id"


def _varint(n: int) -> bytes:
    if n < _SHORT:
        return _LENGTHS[n]
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


#: the varints of lengths below _SHORT (spans and attributes are short), looked up, not built
_SHORT = 4096
_LENGTHS = tuple(bytes((n,)) if n < 0x80 else bytes(((n & 0x7F) | 0x80, n >> 7)) for n in range(_SHORT))
_U64 = (1 << 64) - 1
#: Span.trace_id (field 1) and span_id (field 2), then parent_span_id (field 4): one pack each
_IDS = struct.Struct(">2sQQ2sQ").pack
_IDS_PARENT = struct.Struct(">2sQQ2sQ2sQ").pack


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag, length and bytes."""
    return tag + _varint(len(payload)) + payload


def _value(v: Any) -> bytes:
    """An AnyValue message's bytes."""
    if isinstance(v, str):
        return _field(b"\x0a", v.encode())
    if isinstance(v, bool):
        return b"\x10\x01" if v else b"\x10\x00"
    if isinstance(v, int):
        return b"\x18" + _varint(v & 0xFFFFFFFFFFFFFFFF)
    if isinstance(v, float):
        return b"\x21" + _D64(v)
    if isinstance(v, (bytes, bytearray)):
        return _field(b"\x3a", bytes(v))
    if isinstance(v, (list, tuple)):
        return _field(b"\x2a", b"".join(_field(b"\x0a", _value(x)) for x in v))
    if isinstance(v, dict):
        return _field(b"\x32", b"".join(_field(b"\x0a", _key_value(str(k), x)) for k, x in v.items()))
    return _field(b"\x0a", str(v).encode())


def _key_value(key: str, value: Any) -> bytes:
    """A KeyValue message's bytes."""
    return _field(b"\x0a", key.encode()) + _field(b"\x12", _value(value))


def span_stock(name: str, kind: SpanKind, attrs: dict[str, Any],
               heads: tuple[bytes, bytes] | None = None) -> tuple[int, bytes, tuple[bytes, bytes] | None]:
    """What a LeanSpan's ``stock`` holds for spans that share a name, a kind and their first
    attributes: how many attributes; the bytes of the Span's ``name`` (5) and ``kind`` (6)
    fields followed by those attributes as its ``attributes`` fields (9), in their order; and
    ``heads``, the encoded resource and scope of the tracer that makes them (:func:`heads_of`;
    None: such spans are exported as objects, not records)."""
    return (len(attrs), _field(b"\x2a", name.encode()) + _KIND[kind]
            + b"".join(_field(b"\x4a", _key_value(k, v)) for k, v in attrs.items()), heads)


def heads_of(resource: Any, scope: Any) -> tuple[bytes, bytes]:
    """The encoded ``resource`` field of ResourceSpans and ``scope`` field of ScopeSpans."""
    return _Encoder().heads(resource, scope)


class _Encoder:
    """OTLP bytes of spans; keeps the bytes of repeated attributes, resources and scopes."""

    def __init__(self) -> None:
        #: per field tag, per attribute key: the encoded KeyValue field of each string value seen
        #: (at most _VALUES_PER_KEY values a key: an id that differs every time stops being kept)
        self._kv: dict[bytes, dict[str, dict[str, bytes]]] = {}
        #: by (id(resource), id(scope)): their encoded fields, and the objects (held, so the ids stay theirs)
        self._heads: dict[tuple[int, int], tuple[bytes, bytes, Any, Any]] = {}
        #: by (span name, id(kind)): the encoded name and kind fields (names repeat: method and tool)
        self._names: dict[tuple[str, int], bytes] = {}
        #: by (field tag, attribute key, value length in bytes): a KeyValue's bytes before its string value
        self._heads_by_length: dict[tuple[bytes, str, int], bytes] = {}
        #: by value length in bytes: the request id attribute's bytes before its value
        self._rid_heads: dict[int, bytes] = {}

    def attributes(self, tag: bytes, attrs: Any, skip: int = 0) -> bytes:
        """Each attribute (after the first ``skip``) as a repeated KeyValue field ``tag``."""
        if not attrs:
            return b""
        out = []
        by_key = self._kv.get(tag)
        if by_key is None or len(by_key) > _CACHE_MAX:
            by_key = self._kv[tag] = {}
        # the SDK's BoundedAttributes holds a plain dict (a getattr that misses costs an exception)
        items = attrs if type(attrs) is dict else getattr(attrs, "_dict", attrs)
        for k, v in (itertools.islice(items.items(), skip, None) if skip else items.items()):
            try:  # the usual case: a string value seen before (only strings are kept, so no type test here)
                enc = by_key[k].get(v)
            except (KeyError, TypeError):  # a key not seen yet, or an unhashable value
                enc = None
            if enc is not None:
                out.append(enc)
                continue
            if type(v) is not str:
                out.append(_field(tag, _key_value(k, v)))
                continue
            values = by_key.get(k)
            if values is None:
                values = by_key[k] = {}
            if len(values) < _VALUES_PER_KEY:
                enc = values[v] = _field(tag, _key_value(k, v))
            else:  # a value that differs every time (a request id): the bytes before it kept per length
                raw = v.encode()
                head = self._heads_by_length.get((tag, k, len(raw)))
                if head is None:
                    head = self._head(tag, k, len(raw))
                enc = head + raw
            out.append(enc)
        return b"".join(out)

    def _head(self, tag: bytes, key: str, length: int) -> bytes:
        """The bytes of a repeated KeyValue field ``tag`` with a string value of ``length``
        bytes, up to the value's own bytes."""
        whole = _field(tag, _key_value(key, "x" * length))
        head = whole[:-length] if length else whole
        if len(self._heads_by_length) > _CACHE_MAX:
            self._heads_by_length.clear()
        self._heads_by_length[(tag, key, length)] = head
        return head

    def heads(self, resource: Any, scope: Any) -> tuple[bytes, bytes]:
        """The encoded ``resource`` field of ResourceSpans and ``scope`` field of ScopeSpans."""
        key = (id(resource), id(scope))
        found = self._heads.get(key)
        if found is None:
            res = self.attributes(b"\x0a", resource.attributes) if resource is not None else b""
            sc = b""
            if scope is not None:
                sc = _field(b"\x0a", scope.name.encode()) + (_field(b"\x12", scope.version.encode()) if scope.version else b"")
            if len(self._heads) > 64:
                self._heads.clear()
            found = self._heads[key] = (_field(b"\x0a", res), _field(b"\x0a", sc), resource, scope)
        return found[0], found[1]

    def span(self, s: Any) -> bytes:
        """A Span message's bytes, framed as the ``spans`` field (2) of ScopeSpans."""
        # a SpanContext is a tuple (trace_id, span_id, is_remote, trace_flags, trace_state, is_valid):
        # unpacked at once, not through its properties (a Python call each)
        trace_id, span_id, _, trace_flags, state, _ = s.context
        parent = s.parent
        flags = _FLAGS[trace_flags & 0xFF]
        if parent is None:
            ids = _IDS(b"\x0a\x10", trace_id >> 64, trace_id & _U64, b"\x12\x08", span_id)
        else:
            _, parent_id, remote, _, _, _ = parent
            ids = _IDS_PARENT(b"\x0a\x10", trace_id >> 64, trace_id & _U64, b"\x12\x08", span_id, b"\x22\x08", parent_id)
            if remote:
                flags = _FLAGS[(trace_flags & 0xFF) | 0x200]
        if state is not _NO_STATE and state:  # field 3 goes between the span id and the parent's
            ids = ids[:28] + _field(b"\x1a", state.to_header().encode()) + ids[28:]
        # the name, kind and first attributes' bytes a lean span may carry, made once for many spans
        plain = type(s) in _PLAIN
        stock = s.stock if plain else None
        if stock is not None and len(s.attributes) >= stock[0]:
            n, encoded, _ = stock
            named = b""  # at the head of the kept bytes (the fields' order is free in protobuf)
            if len(s.attributes) > n:
                encoded += self.attributes(b"\x4a", s.attributes, n)
        else:
            kind = s.kind
            named = self._names.get((s.name, id(kind)))  # by id: an enum member hashes in Python
            if named is None:
                named = _field(b"\x2a", s.name.encode()) + _KIND[kind]
                if len(self._names) >= _CACHE_MAX:
                    self._names.clear()
                self._names[(s.name, id(kind))] = named
            # the attributes' plain dict where the SDK keeps one (the public property wraps it in a
            # read-only proxy over a mapping class: iterating that costs more than encoding)
            attrs = s.attributes if plain else getattr(s, "_attributes", None) or s.attributes
            encoded = self.attributes(b"\x4a", attrs)
        parts = [ids, named, _TIMES(0x39, s.start_time or 0, 0x41, s.end_time or 0), encoded]
        if s.dropped_attributes:
            parts += (b"\x50", _varint(s.dropped_attributes))
        events, links = s.events, s.links
        for e in events if events else ():
            body = b"\x09" + _F64(e.timestamp) + _field(b"\x12", e.name.encode()) + self.attributes(b"\x1a", e.attributes)
            parts.append(_field(b"\x5a", body))
        for ln in links if links else ():
            lc = ln.context
            body = b"\x0a\x10" + lc.trace_id.to_bytes(16, "big") + b"\x12\x08" + lc.span_id.to_bytes(8, "big")
            if lc.trace_state:
                body += _field(b"\x1a", lc.trace_state.to_header().encode())
            body += self.attributes(b"\x22", ln.attributes) + b"\x35" + _F32(0x300 if lc.is_remote else 0x100)
            parts.append(_field(b"\x6a", body))
        status = s.status
        # compared, not looked up: an enum member hashes through a Python call
        code = _UNSET_CODE if status is UNSET_STATUS else status.status_code
        if code is not _UNSET_CODE:
            code = _CODE[code]
            parts.append(_field(b"\x7a", (_field(b"\x12", status.description.encode()) if status.description else b"")
                                + b"\x18" + _varint(code)))
            parts += (b"\x85\x01", flags)
        else:
            parts.append(_UNSET_TAIL[flags])  # status present and empty, as the reference encoder writes it
        body = b"".join(parts)
        n = len(body)
        return (b"\x12" + (_LENGTHS[n] if n < _SHORT else _varint(n))) + body

    def _spans(self, spans: Sequence[Any], out: list[bytes]) -> int:
        """Each span's bytes (the ``spans`` field of ScopeSpans) onto ``out``; their length.

        A record (a tuple: see :func:`record`) is written here in a few pieces from its kept
        bytes; a span object through :meth:`span`."""
        total = 0
        add = out.extend
        rid_heads = self._rid_heads
        for s in spans:
            if type(s) is tuple:
                stock, trace_id, span_id, parent_id, flags, start, end, rid = s
                if parent_id:
                    ids = _IDS_PARENT(b"\x0a\x10", trace_id >> 64, trace_id & _U64, b"\x12\x08", span_id,
                                      b"\x22\x08", parent_id)
                else:
                    ids = _IDS(b"\x0a\x10", trace_id >> 64, trace_id & _U64, b"\x12\x08", span_id)
                if rid is None:
                    raw = head = b""
                else:
                    raw = rid.encode()
                    head = rid_heads.get(len(raw))
                    if head is None:
                        head = self._rid_head(len(raw))
                kept, tail = stock[1], _UNSET_TAIL[_FLAGS[flags]]
                size = len(ids) + 18 + len(kept) + len(head) + len(raw) + len(tail)
                length = _LENGTHS[size] if size < _SHORT else _varint(size)
                add((b"\x12", length, ids, _TIMES(0x39, start, 0x41, end), kept, head, raw, tail))
                total += 1 + len(length) + size
            else:
                one = self.span(s)
                out.append(one)
                total += len(one)
        return total

    def _rid_head(self, length: int) -> bytes:
        """A request id's KeyValue bytes before its value of ``length`` bytes (kept by length)."""
        if len(self._rid_heads) > _CACHE_MAX:
            self._rid_heads.clear()
        head = self._rid_heads[length] = self._head(b"\x4a", _REQUEST_ID, length)
        return head

    def request(self, spans: Sequence[Any]) -> bytes:
        """An ExportTraceServiceRequest: the spans (span objects, or records of SERVER spans as
        :func:`record` makes them) grouped by resource, then by scope."""
        if not spans:
            return b""
        first = spans[0]
        if type(first) is tuple:  # the usual batch: records of one tracer's SERVER spans
            heads = first[0][2]
            for s in spans:
                if type(s) is not tuple or s[0][2] is not heads:
                    break
            else:
                return self._message({heads[0]: {heads[1]: spans}})
        else:  # one tracer's span objects
            resource, scope = first.resource, first.instrumentation_scope
            for s in spans:
                if type(s) is tuple or s.instrumentation_scope is not scope or s.resource is not resource:
                    break
            else:
                res, head = self.heads(resource, scope)
                return self._message({res: {head: spans}})
        groups: dict[bytes, dict[bytes, list[Any]]] = {}
        for s in spans:
            res, head = s[0][2] if type(s) is tuple else self.heads(s.resource, s.instrumentation_scope)
            groups.setdefault(res, {}).setdefault(head, []).append(s)
        return self._message(groups)

    def _message(self, groups: dict[bytes, dict[bytes, Sequence[Any]]]) -> bytes:
        """The message's bytes from spans grouped by their encoded resource and scope fields,
        written with one join (a batch is ~150 KB: each framing by concatenation copies it)."""
        out: list[bytes] = []
        for res, scopes in groups.items():
            pieces = [res]
            n = len(res)
            for head, group in scopes.items():
                spans = [head]
                scope_n = len(head) + self._spans(group, spans)
                scope_len = _varint(scope_n)
                pieces += (b"\x12", scope_len, *spans)
                n += 1 + len(scope_len) + scope_n
            out += (b"\x0a", _varint(n), *pieces)
        return b"".join(out)


def record(span: Any) -> Any:
    """What an ended span is kept as until it is exported: for a SERVER span as it began (its
    ``stock`` with the encoded resource and scope, at most a request id added, no status,
    events, links or trace state) a plain tuple of numbers, strings and bytes, ``(stock,
    trace id, span id, parent span id or 0, flags key, start, end, request id or None)``,
    which the garbage collector stops tracking at its first pass and which frees the span's
    objects at once; any other span as it is (span_batching.BatchExport keeps what this gives)."""
    stock = span.stock if type(span) in _PLAIN else None
    if stock is None or stock[2] is None or span.events or span.links or span.dropped_attributes \
            or span.status is not UNSET_STATUS:
        return span
    trace_id, span_id, _, flags, state, _ = span.context
    attrs = span.attributes
    extra = len(attrs) - stock[0]
    rid = attrs.get(_REQUEST_ID) if extra == 1 else None
    if (extra and type(rid) is not str) or (state is not _NO_STATE and state):
        return span
    parent = span.parent
    if parent is None:
        return (stock, trace_id, span_id, 0, flags & 0xFF, span.start_time, span.end_time, rid)
    return (stock, trace_id, span_id, parent[1], (flags & 0xFF) | (0x200 if parent[2] else 0), span.start_time,
            span.end_time, rid)


def otlp_env(signal: str, name: str, default: str | None = None) -> str | None:
    """``OTEL_EXPORTER_OTLP_<SIGNAL>_<name>`` (signal: ``TRACES``, ``METRICS``), else
    ``OTEL_EXPORTER_OTLP_<name>``, else ``default``."""
    return os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_{name}") or os.environ.get(f"OTEL_EXPORTER_OTLP_{name}") or default


def _env(name: str, default: str | None = None) -> str | None:
    return otlp_env("TRACES", name, default)


def headers_from_env(text: str | None) -> dict[str, str]:
    out = {}
    for item in (text or "").split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            out[unquote(key.strip())] = unquote(value.strip())
    return out


def otlp_endpoint(signal: str) -> str:
    """Where a signal (``traces``, ``metrics``) goes: ``OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT`` as
    given, else ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/<signal>``, else the local collector's."""
    specific = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    if specific:
        return specific
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318"
    return base.rstrip("/") + f"/v1/{signal}"


def endpoint_from_env() -> str:
    return otlp_endpoint("traces")


class OtlpHttpSpanExporter(SpanExporter):
    """Spans to an OTLP/HTTP endpoint (protobuf), as the ``OTEL_EXPORTER_OTLP_*`` variables say."""

    def __init__(self, endpoint: str | None = None) -> None:
        self.endpoint = endpoint or endpoint_from_env()
        url = urlsplit(self.endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"OTLP endpoint {self.endpoint!r}: an http:// or https:// URL is needed")
        self._url = url
        self._path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        self.timeout = float(_env("TIMEOUT", "10") or 10)
        self.gzip = (_env("COMPRESSION", "") or "").strip().lower() == "gzip"
        self.headers = {"Content-Type": "application/x-protobuf", "User-Agent": "mcpkit-otlp",
                        **headers_from_env(_env("HEADERS")), **({"Content-Encoding": "gzip"} if self.gzip else {})}
        self._ssl: ssl.SSLContext | None = None
        if url.scheme == "https":
            self._ssl = ssl.create_default_context(cafile=_env("CERTIFICATE"))
            cert, key = _env("CLIENT_CERTIFICATE"), _env("CLIENT_KEY")
            if cert:
                self._ssl.load_cert_chain(cert, key)
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self._encoder = _Encoder()
        self._shutdown = threading.Event()

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._conn is None:
            host, port = self._url.hostname or "localhost", self._url.port
            if self._ssl is not None:
                self._conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=self._ssl)
            else:
                self._conn = http.client.HTTPConnection(host, port, timeout=timeout)
        else:
            self._conn.timeout = timeout
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        if self._shutdown.is_set():
            return SpanExportResult.FAILURE
        with self._lock:
            try:
                body = self._encoder.request(spans)
            except Exception:  # a span we cannot encode must not stop the exporter
                log.exception("could not encode %d spans for OTLP", len(spans))
                return SpanExportResult.FAILURE
            if self.gzip:
                body = gzip.compress(body, 6)
            return self._post(body, len(spans))

    def _post(self, body: bytes, count: int) -> SpanExportResult:
        deadline = time.monotonic() + self.timeout
        delay = 0.5
        while True:
            left = deadline - time.monotonic()
            problem: str
            try:
                conn = self._connection(max(left, 0.1))
                conn.request("POST", self._path, body, self.headers)
                resp = conn.getresponse()
                resp.read()
                if 200 <= resp.status < 300:
                    return SpanExportResult.SUCCESS
                problem = f"HTTP {resp.status}"
                if resp.status not in _RETRY:
                    log.warning("OTLP endpoint %s refused %d spans: %s", self.endpoint, count, problem)
                    return SpanExportResult.FAILURE
                if resp.will_close:
                    self._drop_connection()
            except (OSError, http.client.HTTPException) as exc:
                self._drop_connection()
                problem = f"{type(exc).__name__}: {exc}"
            wait = delay * (0.5 + random.random())
            if time.monotonic() + wait > deadline or self._shutdown.wait(wait):
                log.warning("could not export %d spans to %s: %s", count, self.endpoint, problem)
                return SpanExportResult.FAILURE
            delay *= 2

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def shutdown(self) -> None:
        self._shutdown.set()
        with self._lock:
            self._drop_connection()


__all__ = ["OtlpHttpSpanExporter", "endpoint_from_env", "heads_of", "record", "span_stock"]


#: the protobuf pieces the metrics exporter (metrics_otlp.py) writes its messages with
encode_field, encode_key_value = _field, _key_value

"""The same metrics exported over OTLP/HTTP (protobuf), with the ``otel`` extra.

When: ``OTEL_METRICS_EXPORTER`` lists ``otlp`` (and ``OTEL_SDK_DISABLED`` is not ``true``).
Nothing else turns it on: not ``--traces`` (traces and metrics are asked for separately), not
an ``OTEL_EXPORTER_OTLP_ENDPOINT`` alone (it may be set for other programs).
Where: ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``, else ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/metrics``,
else ``http://localhost:4318/v1/metrics``; ``…_HEADERS`` and ``…_TIMEOUT`` (seconds) likewise;
``OTEL_METRIC_EXPORT_INTERVAL`` (ms, default 60,000); the service from ``OTEL_SERVICE_NAME`` /
``OTEL_RESOURCE_ATTRIBUTES`` (the SDK's resource rules; default name: the server's ``name``).

Nothing more happens per request than with ``--metrics``: requests are counted into the same
:class:`~.metrics.MetricStore`, and every interval (and once when serving ends) its numbers are
written as an ``ExportMetricsServiceRequest`` (cumulative, the conventions' boundaries; the
protobuf wire format written directly, as :mod:`.otlp_export` does for spans) and posted from a
worker thread. Each process exports its own numbers with its own ``service.instance.id``; the
collector adds the workers up. OpenTelemetry is imported only here and only when enabled.
"""

from __future__ import annotations

import http.client
import logging
import os
import struct
import time
from typing import TYPE_CHECKING, Any, Mapping
from urllib.parse import urlsplit

from .._extras import require
from .metrics import DURATION_BUCKETS, METRICS, MetricStore, enable_metrics

if TYPE_CHECKING:
    from .app import App
    from .settings import Settings

log = logging.getLogger("mcpkit.metrics")
#: how a missing extra is named in the one-line error
WHAT = "OTLP metrics export (OTEL_METRICS_EXPORTER=otlp)"
_FIXED64 = struct.Struct("<Q").pack
_DOUBLE = struct.Struct("<d").pack
_SFIXED64 = struct.Struct("<q").pack


def otlp_metrics_wanted(settings: "Settings", environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return "otlp" in [e.strip().lower() for e in env.get("OTEL_METRICS_EXPORTER", "").split(",")]


def check_otlp_extra(settings: "Settings") -> None:
    """Raise MissingExtra (one line naming ``pip install 'mcpkit[otel]'``) if export is asked
    for and the extra is not installed."""
    if otlp_metrics_wanted(settings):
        require("otel", WHAT)


class OtlpMetrics:
    """Sends the numbers of one process's :class:`~.metrics.Metrics` to an OTLP/HTTP endpoint."""

    def __init__(self, app: "App") -> None:
        require("otel", WHAT)
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource

        from .._version import __version__

        self.metrics = enable_metrics(app)  # the store requests are counted into (no route unless --metrics)
        resource = Resource.create({"service.instance.id": f"{os.uname().nodename}:{os.getpid()}"})
        if not os.environ.get("OTEL_SERVICE_NAME"):
            resource = resource.merge(Resource({SERVICE_NAME: app.settings.name or "mcpkit"}))
        self.resource = dict(resource.attributes)
        self.scope = ("mcpkit", __version__)
        from .otlp_export import headers_from_env, otlp_endpoint, otlp_env

        self.endpoint = otlp_endpoint("metrics")
        url = urlsplit(self.endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"OTLP endpoint {self.endpoint!r}: an http:// or https:// URL is needed")
        self._url = url
        self._path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        self.timeout = float(otlp_env("METRICS", "TIMEOUT", "10") or 10)
        self.headers = {"Content-Type": "application/x-protobuf", "User-Agent": "mcpkit-otlp",
                        **headers_from_env(otlp_env("METRICS", "HEADERS"))}
        self.started_ns = time.time_ns()
        try:
            self.interval = max(float(os.environ.get("OTEL_METRIC_EXPORT_INTERVAL", "60000")) / 1000, 0.1)
        except ValueError:
            self.interval = 60.0
        self._failing = False

    def body(self, store: MetricStore) -> bytes:
        """``store`` as an ExportMetricsServiceRequest (opentelemetry/proto/metrics/v1)."""
        from .otlp_export import encode_field as field, encode_key_value as _key_value

        def key_values(tag: bytes, attrs: dict[str, Any]) -> bytes:  # repeated KeyValue field ``tag``
            return b"".join(field(tag, _key_value(k, v)) for k, v in attrs.items())

        start, now = _FIXED64(self.started_ns), _FIXED64(time.time_ns())
        times = b"\x11" + start + b"\x19" + now  # start_time_unix_nano = 2, time_unix_nano = 3 (fixed64)
        bounds = field(b"\x3a", b"".join(_DOUBLE(float(b)) for b in DURATION_BUCKETS))  # explicit_bounds = 7, packed
        metrics = []
        for name, (kind, unit, help_text, label_names, _) in METRICS.items():
            if name == "mcpkit.workers":
                continue  # the collector counts the instances
            points = []
            if kind == "histogram":
                for labels, cell in store.hist.get(name, {}).items():
                    counts = [int(c) for c in cell[:-1]]
                    points.append(field(b"\x0a", key_values(b"\x4a", _attributes(label_names, labels)) + times
                                        + b"\x21" + _FIXED64(sum(counts)) + b"\x29" + _DOUBLE(float(cell[-1]))
                                        + field(b"\x32", b"".join(_FIXED64(c) for c in counts)) + bounds))
                data = field(b"\x4a", b"".join(points) + b"\x10\x02") if points else b""  # histogram = 9, cumulative
            else:
                table = store.counters if kind == "counter" else store.gauges
                for labels, value in table.get(name, {}).items():
                    number = (b"\x31" + _SFIXED64(int(value))) if float(value).is_integer() else (b"\x21" + _DOUBLE(value))
                    points.append(field(b"\x0a", key_values(b"\x3a", _attributes(label_names, labels)) + times + number))
                if not points:
                    data = b""
                elif kind == "counter":  # sum = 7: cumulative, monotonic
                    data = field(b"\x3a", b"".join(points) + b"\x10\x02\x18\x01")
                else:  # gauge = 5
                    data = field(b"\x2a", b"".join(points))
            if data:
                metrics.append(field(b"\x12", field(b"\x0a", name.encode()) + field(b"\x12", help_text.encode())
                                     + field(b"\x1a", (unit or "1").encode()) + data))
        scope = field(b"\x0a", field(b"\x0a", self.scope[0].encode()) + field(b"\x12", self.scope[1].encode()))
        resource = field(b"\x0a", key_values(b"\x0a", self.resource))
        return field(b"\x0a", resource + field(b"\x12", scope + b"".join(metrics)))

    def export(self) -> None:
        """Send the numbers now (blocking: call it in a thread). A failure is logged once until
        a send works again; the next interval sends everything anyway (cumulative)."""
        try:
            body = self.body(self.metrics.observer.collect())
            conn_type = http.client.HTTPSConnection if self._url.scheme == "https" else http.client.HTTPConnection
            conn = conn_type(self._url.hostname or "localhost", self._url.port, timeout=self.timeout)
            try:
                conn.request("POST", self._path, body, self.headers)
                resp = conn.getresponse()
                resp.read()
            finally:
                conn.close()
            if not 200 <= resp.status < 300:
                raise OSError(f"HTTP {resp.status}")
            self._failing = False
        except (OSError, http.client.HTTPException) as exc:
            if not self._failing:
                log.warning("could not export metrics to %s: %s (retried every interval)", self.endpoint, exc)
            self._failing = True

    async def export_forever(self) -> None:
        """Every interval, and once more when stopped (bounded by the timeout)."""
        import trio

        try:
            while True:
                await trio.sleep(self.interval)
                await trio.to_thread.run_sync(self.export)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.export)


def _attributes(names: tuple[str, ...], values: tuple[str, ...]) -> dict[str, str]:
    return {n: v for n, v in zip(names, values) if v != ""}


def enable_otlp_metrics(app: "App") -> OtlpMetrics | None:
    """An exporter of ``app``'s metrics if asked for (see the module's doc), else None; run its
    :meth:`OtlpMetrics.export_forever` while serving."""
    return OtlpMetrics(app) if otlp_metrics_wanted(app.settings) else None


__all__ = ["OtlpMetrics", "check_otlp_extra", "enable_otlp_metrics", "otlp_metrics_wanted"]

"""The same metrics exported over OTLP/HTTP, when the ``otel`` extra is installed and the
standard OpenTelemetry variables ask for it.

Asked for means: ``OTEL_METRICS_EXPORTER`` lists ``otlp``; or it is unset and an OTLP endpoint
is (``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``: the SDK's
default exporter is OTLP). ``OTEL_SDK_DISABLED=true`` turns it off. The endpoint, headers and
timeout are the OTLP exporter's to read; ``OTEL_METRIC_EXPORT_INTERVAL`` (ms, default 60,000)
sets how often; ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` name the service.

Nothing more happens per request than with ``--metrics``: the requests are counted into the
same :class:`~.metrics.MetricStore`, and every interval (and once at the end) its numbers are
turned into OTLP data points (cumulative) and sent, in a worker thread. Each process exports its
own numbers with its own ``service.instance.id``; a collector adds up the workers. It works on
every transport, stdio included. OpenTelemetry is imported only here, and only when asked for.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any, Mapping

from .._extras import require
from .metrics import DURATION_BUCKETS, METRICS, MetricStore, enable_metrics

if TYPE_CHECKING:
    from .app import App

log = logging.getLogger("mcpkit.metrics")
#: how a missing extra is named in the one-line error
WHAT = "OTLP export (OTEL_METRICS_EXPORTER / OTEL_EXPORTER_OTLP_ENDPOINT)"


def otlp_metrics_wanted(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = env.get("OTEL_METRICS_EXPORTER")
    if exporters is not None:
        return "otlp" in [e.strip().lower() for e in exporters.split(",")]
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))


def check_otlp_extra() -> None:
    """Raise MissingExtra (one line naming ``pip install 'mcpkit[otel]'``) if export is asked
    for and the extra is not installed."""
    if otlp_metrics_wanted():
        require("otel", WHAT)


class OtlpMetrics:
    """Sends the numbers of one process's :class:`~.metrics.Metrics` over OTLP/HTTP."""

    def __init__(self, app: "App") -> None:
        require("otel", WHAT)
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.resources import Resource

        self.metrics = enable_metrics(app)  # the store the requests are counted into (no route unless --metrics)
        attrs = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": app.settings.name or "mcpkit"}
        attrs["service.instance.id"] = f"{os.uname().nodename}:{os.getpid()}"
        self.resource = Resource.create(attrs)
        self.exporter = OTLPMetricExporter()
        self.started_ns = time.time_ns()
        try:
            self.interval = max(float(os.environ.get("OTEL_METRIC_EXPORT_INTERVAL", "60000")) / 1000, 0.1)
        except ValueError:
            self.interval = 60.0

    def data(self, store: MetricStore) -> Any:
        """``store`` as OTLP data (the SDK's MetricsData), cumulative since the start."""
        from opentelemetry.sdk.metrics.export import (
            AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, MetricsData, NumberDataPoint,
            ResourceMetrics, ScopeMetrics, Sum,
        )
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        from .._version import __version__

        start, now = self.started_ns, time.time_ns()
        cumulative = AggregationTemporality.CUMULATIVE
        bounds = list(DURATION_BUCKETS)
        out = []
        for name, (kind, unit, help_text, label_names, _) in METRICS.items():
            if name == "mcpkit.workers":
                continue  # the collector counts the instances
            if kind == "histogram":
                points = [HistogramDataPoint(_attributes(label_names, labels), start, now, int(sum(cell[:-1])), cell[-1],
                                             [int(c) for c in cell[:-1]], bounds, None, None)  # type: ignore[arg-type]
                          for labels, cell in store.hist.get(name, {}).items()]
                data: Any = Histogram(points, cumulative) if points else None
            else:
                table = store.counters if kind == "counter" else store.gauges
                numbers = [NumberDataPoint(_attributes(label_names, labels), start, now, _number(v))
                           for labels, v in table.get(name, {}).items()]
                data = (Sum(numbers, cumulative, True) if kind == "counter" else Gauge(numbers)) if numbers else None
            if data is not None:
                out.append(Metric(name, help_text, unit or "1", data))
        scope = InstrumentationScope("mcpkit", __version__)
        return MetricsData([ResourceMetrics(self.resource, [ScopeMetrics(scope, out, "")], "")])

    def export(self) -> None:
        """Send the numbers now (blocking: call it in a thread)."""
        try:
            self.exporter.export(self.data(self.metrics.observer.collect()))
        except Exception as exc:  # the exporter logs failed sends itself; anything else must not stop serving
            log.warning("OTLP metrics export failed: %s", exc)

    async def export_forever(self) -> None:
        """Every interval, and once more when stopped (bounded by the exporter's timeout)."""
        import trio

        try:
            while True:
                await trio.sleep(self.interval)
                await trio.to_thread.run_sync(self.export)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.close)

    def close(self) -> None:
        self.export()
        self.exporter.shutdown()


def _attributes(names: tuple[str, ...], values: tuple[str, ...]) -> dict[str, str]:
    return {n: v for n, v in zip(names, values) if v != ""}


def _number(v: float) -> int | float:
    return int(v) if float(v).is_integer() else v


def enable_otlp_metrics(app: "App") -> OtlpMetrics | None:
    """An exporter of ``app``'s metrics if the environment asks for one, else None; run its
    :meth:`OtlpMetrics.export_forever` while serving."""
    return OtlpMetrics(app) if otlp_metrics_wanted() else None


__all__ = ["OtlpMetrics", "check_otlp_extra", "enable_otlp_metrics", "otlp_metrics_wanted"]

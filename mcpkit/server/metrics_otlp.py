"""The same metrics exported over OTLP/HTTP, when the ``otel`` extra is installed and the
standard OpenTelemetry variables ask for it.

Asked for means: ``OTEL_METRICS_EXPORTER`` lists ``otlp``; or it is unset and an OTLP endpoint
is (``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``: the SDK's
default exporter is OTLP). ``OTEL_SDK_DISABLED=true`` turns it off. Everything else —
endpoint, headers, interval (``OTEL_METRIC_EXPORT_INTERVAL``), ``OTEL_SERVICE_NAME`` — is the
SDK's to read. It works on every transport, stdio included, and in every worker (each exports
its own numbers; the collector adds them up by ``service.instance.id``).

OpenTelemetry is imported only here, and only when export is asked for.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping

from .._extras import require
from .observe import Observer, RequestRecord
from .metrics import (
    DURATION_BUCKETS, METRICS, OPERATION_LABELS, SESSION_LABELS, operation_labels, ran_out_of_time, session_labels,
)

if TYPE_CHECKING:
    from .app import App

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


class OtlpMetrics(Observer):
    """Records into OpenTelemetry instruments; a periodic reader exports them."""

    def __init__(self, app: "App") -> None:
        require("otel", WHAT)
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.metrics import Observation
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource

        from .._version import __version__

        self.app = app
        attrs = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": app.settings.name or "mcpkit"}
        attrs["service.instance.id"] = f"{os.uname().nodename}:{os.getpid()}"
        self.provider = MeterProvider(metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())],
                                      resource=Resource.create(attrs))
        meter = self.provider.get_meter("mcpkit", __version__)
        bounds = list(DURATION_BUCKETS)

        def hist(name: str) -> Any:
            return meter.create_histogram(name, unit="s", description=METRICS[name][2],
                                          explicit_bucket_boundaries_advisory=bounds)

        def updown(name: str) -> Any:
            return meter.create_up_down_counter(name, description=METRICS[name][2])

        self.operation = hist("mcp.server.operation.duration")
        self.session = hist("mcp.server.session.duration")
        self.in_flight = updown("mcpkit.requests.in_flight")
        self.sessions = updown("mcpkit.sessions.open")
        self.streams = updown("mcpkit.sse_streams.open")
        self.rejections = meter.create_counter("mcpkit.requests.rejected", description=METRICS["mcpkit.requests.rejected"][2])
        self.notifications = meter.create_counter("mcpkit.notifications", description=METRICS["mcpkit.notifications"][2])

        def tasks(options: Any) -> Any:
            counts: dict[str, int] = {}
            for run in list(app.tasks.running.values()):
                status = str(getattr(run.record, "status", "working"))
                counts[status] = counts.get(status, 0) + 1
            return [Observation(n, {"status": s}) for s, n in counts.items()]

        def upstreams(options: Any) -> Any:
            out = []
            for plugin in app.plugins:
                if plugin.loaded and plugin.status is not None:
                    try:
                        up = plugin.status().get("state") == "connected"
                    except Exception:
                        up = False
                    out.append(Observation(1 if up else 0, {"upstream": plugin.name}))
            return out

        def state(options: Any) -> Any:
            return [] if app.shared is None else [Observation(1 if app.shared.ok else 0)]

        meter.create_observable_gauge("mcpkit.tasks", [tasks], description=METRICS["mcpkit.tasks"][2])
        meter.create_observable_gauge("mcpkit.upstream.up", [upstreams], description=METRICS["mcpkit.upstream.up"][2])
        meter.create_observable_gauge("mcpkit.state.up", [state], description=METRICS["mcpkit.state.up"][2])

    def request(self, rec: RequestRecord) -> Any:
        self.in_flight.add(1, {"mcp.transport": rec.transport})
        return super().request(rec)

    def ended(self, rec: RequestRecord) -> None:
        self.in_flight.add(-1, {"mcp.transport": rec.transport})
        if rec.error_type is not None and ran_out_of_time(self.app, rec):
            self.rejections.add(1, {"reason": "deadline", "mcp.transport": rec.transport})
        self.operation.record(rec.duration, _attributes(OPERATION_LABELS, operation_labels(self.app, rec)))

    def notification(self, method: str, transport: str, session_id: str | None, meta: dict[str, Any] | None) -> None:
        known = method.startswith("notifications/") and len(method) < 64
        self.notifications.add(1, {"mcp.method.name": method if known else "_OTHER"})

    def session_opened(self, transport: str, session_id: str | None) -> None:
        self.sessions.add(1, {"mcp.transport": transport})

    def session_closed(self, transport: str, session_id: str | None, seconds: float) -> None:
        self.sessions.add(-1, {"mcp.transport": transport})
        self.session.record(seconds, _attributes(SESSION_LABELS, session_labels(transport)))

    def stream_opened(self, transport: str) -> None:
        self.streams.add(1, {"mcp.transport": transport})

    def stream_closed(self, transport: str) -> None:
        self.streams.add(-1, {"mcp.transport": transport})

    def rejected(self, reason: str, transport: str) -> None:
        self.rejections.add(1, {"reason": reason, "mcp.transport": transport})

    def close(self) -> None:
        """Export what is left, then stop (bounded by the exporter's timeout)."""
        self.provider.shutdown()


def _attributes(names: tuple[str, ...], values: tuple[str, ...]) -> dict[str, str]:
    return {n: v for n, v in zip(names, values) if v != ""}


def enable_otlp_metrics(app: "App") -> OtlpMetrics | None:
    """Export metrics over OTLP if the environment asks for it (then once per process)."""
    if not otlp_metrics_wanted():
        return None
    otlp = OtlpMetrics(app)
    app.observers.add(otlp)
    return otlp


__all__ = ["OtlpMetrics", "check_otlp_extra", "enable_otlp_metrics", "otlp_metrics_wanted"]

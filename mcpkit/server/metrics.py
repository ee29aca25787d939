"""Metrics: what a running server counts, kept in the process, shown as Prometheus text.

:class:`MetricsObserver` is an :class:`~.observe.Observer`: it feeds a :class:`MetricStore`
(plain dicts, no dependency) with

- ``mcp.server.operation.duration`` and ``mcp.server.session.duration``: histograms (seconds)
  with the attributes and bucket boundaries of the OpenTelemetry semantic conventions for MCP;
- what an operator needs besides: requests in flight, open sessions and SSE streams, requests
  refused by reason, notifications; and, read when the metrics are collected (nothing on the
  hot path), tasks running here by status, upstream links and the Redis link.

``--workers N`` gives one view: each worker writes its snapshot to a folder the parent made
(``metrics_dir``) about once a second and at exit; whichever worker answers ``/metrics`` adds
up the files (:func:`combined`): counters and histograms of every worker (those of a worker
that died stay counted, so totals never go back), gauges of the live ones only. The Prometheus
text (:func:`exposition`) and the routes are the transports' business.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import math
import os
import secrets
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import msgspec

from .observe import NETWORK_TRANSPORT, Observer, RequestRecord

if TYPE_CHECKING:
    from .app import App

log = logging.getLogger("mcpkit.metrics")

#: the semantic conventions' boundaries for both MCP duration histograms (seconds)
DURATION_BUCKETS: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
#: how often a worker writes its snapshot for the others (seconds)
SNAPSHOT_EVERY_S = 1.0
#: distinct label sets one metric may hold; past it new ones are counted under ``_OTHER``
MAX_SERIES = 2000

OPERATION_LABELS = ("mcp.method.name", "gen_ai.tool.name", "gen_ai.prompt.name", "gen_ai.operation.name",
                    "error.type", "rpc.response.status_code", "mcp.protocol.version", "network.transport",
                    "network.protocol.name")
SESSION_LABELS = ("network.transport", "network.protocol.name", "mcp.transport")

#: name -> (kind, unit, help, label names, how gauges of several workers combine)
METRICS: dict[str, tuple[str, str, str, tuple[str, ...], str]] = {
    "mcp.server.operation.duration": ("histogram", "s", "MCP request duration as observed on the server, from "
                                      "receipt until the answer is sent", OPERATION_LABELS, ""),
    "mcp.server.session.duration": ("histogram", "s", "Duration of an MCP session as observed on the server",
                                    SESSION_LABELS, ""),
    "mcpkit.requests.in_flight": ("gauge", "", "MCP requests being served (in handlers, every transport)", (), "sum"),
    "mcpkit.sessions.open": ("gauge", "", "Open MCP sessions (stdio process, legacy SSE stream, HTTP session)",
                             ("mcp.transport",), "sum"),
    "mcpkit.sse_streams.open": ("gauge", "", "Open SSE streams toward clients", ("mcp.transport",), "sum"),
    "mcpkit.requests.rejected": ("counter", "", "Requests refused before a handler saw them, by reason",
                                 ("reason", "mcp.transport"), ""),
    "mcpkit.notifications": ("counter", "", "Notifications received from clients", ("mcp.method.name",), ""),
    "mcpkit.tasks": ("gauge", "", "Tasks running in this server, by status", ("status",), "sum"),
    "mcpkit.upstream.up": ("gauge", "", "1 when the upstream server is connected (in every worker), else 0",
                           ("upstream",), "min"),
    "mcpkit.state.up": ("gauge", "", "1 when the link to shared state (Redis) works (in every worker), else 0",
                        (), "min"),
    "mcpkit.workers": ("gauge", "", "Worker processes whose metrics this view adds up", (), "sum"),
}

_NULL = nullcontext()
_OTHER = "_OTHER"
Labels = tuple[str, ...]


class MetricStore:
    """The numbers of one process: histograms as per-bucket counts plus sum, counters, gauges,
    each keyed by metric name, then by the tuple of label values (in the order METRICS names)."""

    __slots__ = ("hist", "counters", "gauges")

    def __init__(self) -> None:
        #: name -> labels -> [count in bucket 0 .. n-1, count above the last, sum]
        self.hist: dict[str, dict[Labels, list[float]]] = {}
        self.counters: dict[str, dict[Labels, float]] = {}
        self.gauges: dict[str, dict[Labels, float]] = {}

    def observe(self, name: str, labels: Labels, value: float) -> None:
        series = self.hist.get(name)
        if series is None:
            series = self.hist[name] = {}
        cell = series.get(labels)
        if cell is None:
            if len(series) >= MAX_SERIES:
                labels = (_OTHER,) * len(labels)
                cell = series.get(labels)
            if cell is None:
                cell = series[labels] = [0.0] * (len(DURATION_BUCKETS) + 2)
        cell[bisect.bisect_left(DURATION_BUCKETS, value)] += 1
        cell[-1] += value

    def add(self, name: str, labels: Labels, delta: float = 1.0) -> None:
        """A counter goes up, or a gauge up or down (by METRICS' kind)."""
        table = self.gauges if METRICS[name][0] == "gauge" else self.counters
        series = table.get(name)
        if series is None:
            series = table[name] = {}
        if labels not in series and len(series) >= MAX_SERIES:
            labels = (_OTHER,) * len(labels)
        series[labels] = series.get(labels, 0.0) + delta

    def set(self, name: str, labels: Labels, value: float) -> None:
        self.gauges.setdefault(name, {})[labels] = value

    def snapshot(self) -> dict[str, Any]:
        """Everything, as plain lists (what a worker writes for the others)."""
        return {"hist": {n: [[list(k), v] for k, v in s.items()] for n, s in self.hist.items()},
                "counters": {n: [[list(k), v] for k, v in s.items()] for n, s in self.counters.items()},
                "gauges": {n: [[list(k), v] for k, v in s.items()] for n, s in self.gauges.items()}}


class MetricsObserver(Observer):
    """Counts what the server does into a :class:`MetricStore`."""

    def __init__(self, app: "App", store: MetricStore | None = None) -> None:
        self.app = app
        self.store = store if store is not None else MetricStore()
        #: what a finished request is told apart by -> its histogram cell (the labels worked
        #: out once); emptied when the registry is replaced (a tool may have come or gone)
        self._cells: dict[tuple[Any, ...], list[float]] = {}
        self._registry = app.registry

    # -- the hot path (requests in flight are read from the app when collected) -------------------
    def request(self, rec: RequestRecord) -> Any:
        return _NULL

    def ended(self, rec: RequestRecord) -> None:
        error = rec.error_type
        if error is not None and ran_out_of_time(self.app, rec):
            self.store.add("mcpkit.requests.rejected", ("deadline", rec.transport))
        key = (rec.method, rec.target, error, rec.status_code, rec.protocol_version, rec.transport)
        cell = self._cells.get(key)
        if cell is None or self._registry is not self.app.registry:
            cell = self._cell(key, rec)
        duration = rec.duration
        cell[bisect.bisect_left(DURATION_BUCKETS, duration)] += 1
        cell[-1] += duration

    def _cell(self, key: tuple[Any, ...], rec: RequestRecord) -> list[float]:
        if self._registry is not self.app.registry or len(self._cells) >= MAX_SERIES:
            self._cells.clear()  # keys hold names clients chose: bounded like the series
            self._registry = self.app.registry
        series = self.store.hist.setdefault("mcp.server.operation.duration", {})
        labels = operation_labels(self.app, rec)
        if labels not in series and len(series) >= MAX_SERIES:
            labels = (_OTHER,) * len(labels)
        cell = series.get(labels)
        if cell is None:
            cell = series[labels] = [0.0] * (len(DURATION_BUCKETS) + 2)
        self._cells[key] = cell
        return cell

    # -- the rest ------------------------------------------------------------------------------
    def notification(self, method: str, transport: str, session_id: str | None, meta: dict[str, Any] | None) -> None:
        known = method.startswith("notifications/") and len(method) < 64
        self.store.add("mcpkit.notifications", (method if known else _OTHER,))

    def session_opened(self, transport: str, session_id: str | None) -> None:
        self.store.add("mcpkit.sessions.open", (transport,))

    def session_closed(self, transport: str, session_id: str | None, seconds: float) -> None:
        self.store.add("mcpkit.sessions.open", (transport,), -1)
        self.store.observe("mcp.server.session.duration", session_labels(transport), seconds)

    def stream_opened(self, transport: str) -> None:
        self.store.add("mcpkit.sse_streams.open", (transport,))

    def stream_closed(self, transport: str) -> None:
        self.store.add("mcpkit.sse_streams.open", (transport,), -1)

    def rejected(self, reason: str, transport: str) -> None:
        self.store.add("mcpkit.requests.rejected", (reason, transport))

    # -- read when collected ------------------------------------------------------------------------
    def collect(self) -> MetricStore:
        """The store with the gauges read now (in flight, tasks, links) filled in."""
        store = self.store
        store.gauges["mcpkit.requests.in_flight"] = {(): float(len(self.app.requests.scopes))}
        tasks: dict[Labels, float] = {}
        for run in list(self.app.tasks.running.values()):
            key = (str(getattr(run.record, "status", "working")),)
            tasks[key] = tasks.get(key, 0.0) + 1
        store.gauges["mcpkit.tasks"] = tasks
        upstreams: dict[Labels, float] = {}
        for plugin in self.app.plugins:
            if plugin.loaded and plugin.status is not None:
                with contextlib.suppress(Exception):
                    upstreams[(plugin.name,)] = 1.0 if plugin.status().get("state") == "connected" else 0.0
        store.gauges["mcpkit.upstream.up"] = upstreams
        if self.app.shared is not None:
            store.gauges["mcpkit.state.up"] = {(): 1.0 if self.app.shared.ok else 0.0}
        store.gauges["mcpkit.workers"] = {(): 1.0}
        return store


def operation_labels(app: "App", rec: RequestRecord) -> Labels:
    """The values of OPERATION_LABELS for one finished request ("" where one does not apply).
    Names a client invents (an unknown tool, prompt or method) become ``_OTHER``: a client
    cannot make series without end."""
    method, target, transport = rec.method, rec.target, rec.transport
    tool = prompt = operation = ""
    if method == "tools/call":
        operation = "execute_tool"
        tool = target if target in app.registry.tools else _OTHER
    elif method == "prompts/get":
        prompt = target if target in app.registry.prompts else _OTHER
    error = rec.error_type
    if error == "-32601":  # method not found
        method = _OTHER
    return (method, tool or "", prompt or "", operation, error or "", "" if rec.status_code is None else str(rec.status_code),
            rec.protocol_version or "", NETWORK_TRANSPORT.get(transport, ""), "" if transport == "stdio" else "http")


def ran_out_of_time(app: "App", rec: RequestRecord) -> bool:
    """The request was stopped at its deadline: -32001, or a tool's "timed out" error result
    (an error result that took the tool's whole timeout)."""
    if rec.error_type == "-32001":
        return True
    if rec.error_type != "tool_error" or rec.target is None:
        return False
    tool = app.registry.tools.get(rec.target)
    if tool is None:
        return False
    timeout = getattr(tool, "timeout", None) or app.settings.default_timeout
    return rec.duration >= timeout


def session_labels(transport: str) -> Labels:
    return (NETWORK_TRANSPORT.get(transport, ""), "" if transport == "stdio" else "http", transport)


# -- several workers ---------------------------------------------------------------------------------
class SnapshotFiles:
    """The folder the workers of one deployment share: one file per worker, ``PID-TOKEN.json``,
    replaced whole (written aside, then renamed) so a reader never sees half of one."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.path = self.folder / f"{os.getpid()}-{secrets.token_hex(4)}.json"

    def write(self, store: MetricStore) -> None:
        aside = self.path.with_suffix(".tmp")
        aside.write_bytes(msgspec.json.encode(store.snapshot()))
        os.replace(aside, self.path)

    def others(self) -> Iterable[tuple[bool, dict[str, Any]]]:
        """(is that worker alive, its snapshot) for every other worker's file."""
        for path in sorted(self.folder.glob("*.json")):
            if path == self.path:
                continue
            try:
                snap = msgspec.json.decode(path.read_bytes())
            except (OSError, msgspec.DecodeError):
                continue  # gone meanwhile, or not ours
            yield _alive(path.name.partition("-")[0]), snap


def _alive(pid_text: str) -> bool:
    try:
        os.kill(int(pid_text), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def combined(own: MetricStore, others: Iterable[tuple[bool, dict[str, Any]]]) -> MetricStore:
    """``own`` plus the other workers' snapshots: histograms and counters of all of them added,
    gauges of the live ones (summed, or the least for the ``up`` gauges)."""
    out = MetricStore()
    _merge(out, True, own.snapshot())
    for alive, snap in others:
        _merge(out, alive, snap)
    return out


def _merge(out: MetricStore, alive: bool, snap: dict[str, Any]) -> None:
    for name, series in snap.get("hist", {}).items():
        if name not in METRICS:
            continue
        table = out.hist.setdefault(name, {})
        for labels, cell in series:
            key = tuple(labels)
            mine = table.get(key)
            if mine is None:
                table[key] = list(cell)
            else:
                for i, v in enumerate(cell):
                    mine[i] += v
    for name, series in snap.get("counters", {}).items():
        if name in METRICS:
            table = out.counters.setdefault(name, {})
            for labels, v in series:
                table[tuple(labels)] = table.get(tuple(labels), 0.0) + v
    if not alive:
        return
    for name, series in snap.get("gauges", {}).items():
        if name not in METRICS:
            continue
        how = METRICS[name][4]
        table = out.gauges.setdefault(name, {})
        for labels, v in series:
            key = tuple(labels)
            if key not in table:
                table[key] = v
            elif how == "min":
                table[key] = min(table[key], v)
            else:
                table[key] += v


# -- Prometheus text ----------------------------------------------------------------------------------
def prometheus_name(name: str, kind: str, unit: str) -> str:
    base = name.replace(".", "_").replace("-", "_")
    if unit == "s":
        base += "_seconds"
    return base


def _label_text(names: tuple[str, ...], values: Iterable[str], extra: str = "") -> str:
    parts = [f'{n.replace(".", "_")}="{_escape(v)}"' for n, v in zip(names, values) if v != ""]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(v: float) -> str:
    if v == math.inf:
        return "+Inf"
    return repr(int(v)) if float(v).is_integer() and abs(v) < 2**53 else repr(float(v))


def exposition(store: MetricStore) -> bytes:
    """``store`` in the Prometheus text format (version 0.0.4)."""
    lines: list[str] = []
    for name, (kind, unit, help_text, label_names, _) in METRICS.items():
        prom = prometheus_name(name, kind, unit)
        if kind == "histogram":
            series = store.hist.get(name)
            if not series:
                continue
            lines += [f"# HELP {prom} {help_text}", f"# TYPE {prom} histogram"]
            for labels, cell in sorted(series.items()):
                running = 0.0
                for bound, count in zip((*DURATION_BUCKETS, math.inf), cell[:-1]):
                    running += count
                    le = 'le="' + ("+Inf" if bound == math.inf else repr(float(bound))) + '"'
                    lines.append(f"{prom}_bucket{_label_text(label_names, labels, le)} {_num(running)}")
                text = _label_text(label_names, labels)
                lines.append(f"{prom}_sum{text} {repr(float(cell[-1]))}")
                lines.append(f"{prom}_count{text} {_num(running)}")
        else:
            table = store.counters if kind == "counter" else store.gauges
            series = table.get(name)
            if not series:
                continue
            suffix = "_total" if kind == "counter" else ""
            lines += [f"# HELP {prom}{suffix} {help_text}", f"# TYPE {prom}{suffix} {kind}"]
            for labels, value in sorted(series.items()):
                lines.append(f"{prom}{suffix}{_label_text(label_names, labels)} {_num(value)}")
    return ("\n".join(lines) + "\n").encode() if lines else b""


#: the Content-Type of :func:`exposition`
CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


# -- the lifetime of one process's metrics ------------------------------------------------------------
class Metrics:
    """The metrics of one serving process: the observer, and (with ``metrics_dir``) its
    snapshot file; :meth:`text` is what ``/metrics`` answers."""

    def __init__(self, app: "App") -> None:
        self.observer = MetricsObserver(app)
        folder = app.settings.metrics_dir
        self.files = SnapshotFiles(folder) if folder else None

    def view(self) -> MetricStore:
        store = self.observer.collect()
        if self.files is None:
            return store
        view = combined(store, self.files.others())
        view.gauges["mcpkit.workers"] = {(): float(sum(1 for _ in self._live_files()) + 1)}
        return view

    def _live_files(self) -> Iterable[Path]:
        assert self.files is not None
        for path in self.files.folder.glob("*.json"):
            if path != self.files.path and _alive(path.name.partition("-")[0]):
                yield path

    def text(self) -> bytes:
        return exposition(self.view())

    def write_snapshot(self) -> None:
        if self.files is not None:
            try:
                self.files.write(self.observer.collect())
            except OSError as exc:  # a full disk or a removed folder: the local view still works
                log.warning("could not write the metrics snapshot %s: %s", self.files.path, exc)

    async def share_forever(self) -> None:
        """Write this worker's snapshot every SNAPSHOT_EVERY_S, and once more when stopped."""
        import trio

        if self.files is None:
            return
        try:
            while True:
                self.write_snapshot()
                await trio.sleep(SNAPSHOT_EVERY_S)
        finally:
            self.write_snapshot()


def enable_metrics(app: "App") -> Metrics:
    """Start counting: a :class:`Metrics` whose observer watches ``app`` (once per app)."""
    if app.metrics is None:
        app.metrics = Metrics(app)
        app.observers.add(app.metrics.observer)
    return app.metrics


__all__ = ["CONTENT_TYPE", "DURATION_BUCKETS", "METRICS", "MetricStore", "Metrics", "MetricsObserver",
           "SnapshotFiles", "combined", "enable_metrics", "exposition", "prometheus_name"]

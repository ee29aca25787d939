"""Metrics (issue 25): the store and its Prometheus text; a real Prometheus scraping a real
`mcpkit serve --metrics` after known calls from mcpkit's client; --workers 2 adding up in one
scrape; /metrics absent without --metrics; refusals counted by reason."""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
import trio

from mcpkit.server.metrics import (
    DURATION_BUCKETS, SNAPSHOT_EVERY_S, MetricStore, SnapshotFiles, combined, exposition,
)

from .http_helpers import HttpServer, modern_headers, wait_until

PROMETHEUS = shutil.which("prometheus")
OP = "mcp.server.operation.duration"
OP_LABELS = ("tools/call", "greet", "", "execute_tool", "", "", "2026-07-28", "tcp", "http")


def parse(text: str) -> dict[str, float]:
    """Prometheus text -> {"name{labels}": value}, checking every line is a comment or a sample."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)', line)
        assert m, f"not a sample line: {line!r}"
        out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def samples(text: str, name: str, **labels: str) -> dict[str, float]:
    """The samples of ``name`` whose labels include ``labels``."""
    want = [f'{k}="{v}"' for k, v in labels.items()]
    return {k: v for k, v in parse(text).items() if k.split("{")[0] == name and all(w in k for w in want)}


# -- the store and its text ----------------------------------------------------------------------------
def test_histogram_buckets_are_cumulative_with_le_and_sum() -> None:
    store = MetricStore()
    for value in (0.005, 0.01, 0.015, 0.7, 400.0):
        store.observe(OP, OP_LABELS, value)
    text = exposition(store).decode()
    assert "# TYPE mcp_server_operation_duration_seconds histogram" in text
    base = 'mcp_method_name="tools/call",gen_ai_tool_name="greet",gen_ai_operation_name="execute_tool",' \
           'mcp_protocol_version="2026-07-28",network_transport="tcp",network_protocol_name="http"'
    values = parse(text)
    bucket = lambda le: values[f"mcp_server_operation_duration_seconds_bucket{{{base},le=\"{le}\"}}"]  # noqa: E731
    assert bucket("0.01") == 2  # le is inclusive: 0.01 falls in the 0.01 bucket
    assert bucket("0.02") == 3 and bucket("0.5") == 3 and bucket("1.0") == 4 and bucket("300.0") == 4
    assert bucket("+Inf") == 5
    assert values[f"mcp_server_operation_duration_seconds_count{{{base}}}"] == 5
    assert math.isclose(values[f"mcp_server_operation_duration_seconds_sum{{{base}}}"], 400.73)
    assert len([k for k in values if k.startswith("mcp_server_operation_duration_seconds_bucket")]) == len(DURATION_BUCKETS) + 1


def test_counters_gauges_and_escaping() -> None:
    store = MetricStore()
    store.add("mcpkit.requests.rejected", ("origin", "http"))
    store.add("mcpkit.requests.rejected", ("origin", "http"))
    store.add("mcpkit.sessions.open", ("http",))
    store.add("mcpkit.sessions.open", ("http",), -1)
    store.add("mcpkit.notifications", ('notifications/"odd"\\\n',))
    text = exposition(store).decode()
    assert 'mcpkit_requests_rejected_total{reason="origin",mcp_transport="http"} 2' in text
    assert "# TYPE mcpkit_requests_rejected_total counter" in text
    assert 'mcpkit_sessions_open{mcp_transport="http"} 0' in text
    assert 'mcp_method_name="notifications/\\"odd\\"\\\\\\n"' in text
    parse(text)


def test_a_client_cannot_make_series_without_end() -> None:
    store = MetricStore()
    for i in range(2500):
        store.add("mcpkit.notifications", (f"notifications/x{i}",))
    assert len(store.counters["mcpkit.notifications"]) == 2001
    assert store.counters["mcpkit.notifications"][("_OTHER",)] == 500


def test_workers_snapshots_add_up_and_dead_workers_keep_counts_not_gauges(tmp_path: Path) -> None:
    own, other = MetricStore(), MetricStore()
    own.observe(OP, OP_LABELS, 0.03)
    own.set("mcpkit.upstream.up", ("up1",), 1)
    other.observe(OP, OP_LABELS, 0.5)
    other.add("mcpkit.sessions.open", ("http",), 3)
    other.set("mcpkit.upstream.up", ("up1",), 0)
    live = SnapshotFiles(tmp_path)  # this process: alive
    live.path = tmp_path / f"{os.getpid()}-aaaa.json"
    live.write(other)
    proc = subprocess.Popen(["true"])
    proc.wait()
    gone = SnapshotFiles(tmp_path)
    gone.path = tmp_path / f"{proc.pid}-bbbb.json"
    gone.write(other)
    me = SnapshotFiles(tmp_path)
    view = combined(own, me.others())
    cell = view.hist[OP][OP_LABELS]
    assert sum(cell[:-1]) == 3 and math.isclose(cell[-1], 1.03)  # every worker's histogram
    assert view.gauges["mcpkit.sessions.open"][("http",)] == 3  # the live worker's gauge only
    assert view.gauges["mcpkit.upstream.up"][("up1",)] == 0  # "up" only when up in every live worker


# -- real servers ----------------------------------------------------------------------------------------
def call_greet(server: HttpServer, n: int) -> None:
    """``n`` greet calls through mcpkit's client (stateless era, the 2026-07-28 wire)."""
    from mcpkit.client import connect

    async def main() -> None:
        async with connect(f"http://127.0.0.1:{server.port}/mcp") as client:
            for i in range(n):
                result = await client.call_tool("greet", {"name": f"n{i}"})
                assert "n" in str(result)

    trio.run(main)


def scrape(server: HttpServer, headers: dict[str, str] | None = None) -> tuple[int, str]:
    status, h, body = server.call("GET", "/metrics", headers=headers)
    if status == 200:
        assert h["content-type"].startswith("text/plain; version=0.0.4")
    return status, body.decode()


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Any]:
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (make test-tools installs it)")
    started: list[subprocess.Popen[bytes]] = []

    def start(target_port: int) -> "Prometheus":
        port = _free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: mcpkit\n    scrape_interval: 1s\n    scrape_timeout: 900ms\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n")
        proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
                                 f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "wb"))
        started.append(proc)
        prom = Prometheus(port)
        assert wait_until(prom.ready, 30), (tmp_path / "prometheus.log").read_text()[-2000:]
        return prom

    yield start
    for proc in started:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Prometheus:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def query(self, promql: str) -> list[dict[str, Any]]:
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]["result"]

    def wait_for(self, promql: str, value: float, timeout: float = 30) -> list[dict[str, Any]]:
        """The query's result once its first sample equals ``value`` (scrapes come every second)."""
        end = time.monotonic() + timeout
        result: list[dict[str, Any]] = []
        while time.monotonic() < end:
            result = self.query(promql)
            if result and float(result[0]["value"][1]) == value:
                return result
            time.sleep(0.5)
        raise AssertionError(f"{promql} never became {value}: {result}")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_prometheus_scrapes_the_operation_histogram_with_counts_and_labels(hello: Any, prometheus: Any) -> None:
    with HttpServer("--plugin", "hello", "--metrics") as server:
        prom = prometheus(server.port)
        call_greet(server, 7)
        status, _, body = server.rpc("tools/call", {"name": "fail", "arguments": {}, "_meta": _meta()},
                                     headers=modern_headers("tools/call", "fail"))
        assert status == 200 and body["result"]["isError"] is True
        result = prom.wait_for('sum(mcp_server_operation_duration_seconds_count{gen_ai_tool_name="greet"})', 7)
        series = prom.query('mcp_server_operation_duration_seconds_count{gen_ai_tool_name="greet"}')
        assert len(series) == 1, series
        labels = series[0]["metric"]
        assert labels["job"] == "mcpkit"
        assert labels["mcp_method_name"] == "tools/call" and labels["gen_ai_operation_name"] == "execute_tool"
        assert labels["network_transport"] == "tcp" and labels["mcp_protocol_version"] == "2026-07-28"
        assert "error_type" not in labels, labels
        # the buckets: every greet answered within 10 s, and histogram_quantile works on them
        prom.wait_for('sum(mcp_server_operation_duration_seconds_bucket{gen_ai_tool_name="greet",le="10.0"})', 7)
        p99 = prom.query('histogram_quantile(0.99, sum by (le) (mcp_server_operation_duration_seconds_bucket'
                         '{gen_ai_tool_name="greet"}))')
        assert p99 and 0 < float(p99[0]["value"][1]) <= 10, p99
        failed = prom.wait_for('mcp_server_operation_duration_seconds_count{gen_ai_tool_name="fail"}', 1)
        assert failed[0]["metric"]["error_type"] == "tool_error"
        assert result
        # every query of the Grafana dashboard in docs/ is valid PromQL over these names, and the
        # per-tool ones find the tool
        dashboard = json.loads((Path(__file__).parent.parent / "docs" / "grafana-mcpkit.json").read_text())
        exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
        assert len(exprs) >= 10
        time.sleep(2)  # two scrapes past the calls: rates over them are defined
        for expr in exprs:
            result = prom.query(expr.replace("$__rate_interval", "1m").replace("$job", ".*"))
            if "gen_ai_tool_name" in expr and "histogram_quantile" not in expr:
                assert any(r["metric"].get("gen_ai_tool_name") == "greet" for r in result), (expr, result)


def _meta() -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "0"}}


def _greet_on_new_connection(server: HttpServer, i: int) -> int:
    """One greet call on a fresh connection, then /healthz on it: the pid of the worker that served it."""
    c = server.conn()
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": "greet", "arguments": {"name": "w"}, "_meta": _meta()}})
    c.request("POST", "/mcp", body=body, headers={"Content-Type": "application/json",
                                                    "Accept": "application/json, text/event-stream",
                                                    **modern_headers("tools/call", "greet")})
    resp = c.getresponse()
    assert resp.status == 200 and "result" in json.loads(resp.read())
    c.request("GET", "/healthz")
    pid = json.loads(c.getresponse().read())["pid"]
    c.close()
    return int(pid)


@pytest.mark.parametrize("http_server", ["mcpkit", "hypercorn"])
def test_workers_give_one_view_in_one_scrape(hello: Any, prometheus: Any, http_server: str) -> None:
    with HttpServer("--plugin", "hello", "--metrics", "--workers", "2", "--server", http_server) as server:
        pids: dict[int, int] = {}
        calls = 0
        while calls < 400 and (len(pids) < 2 or calls < 40):
            pid = _greet_on_new_connection(server, calls)
            pids[pid] = pids.get(pid, 0) + 1
            calls += 1
        assert len(pids) == 2, f"every call went to one worker: {pids}"
        metric = "mcp_server_operation_duration_seconds_count"

        def total(text: str) -> float:
            return sum(samples(text, metric, gen_ai_tool_name="greet").values())

        # each worker writes its snapshot every second: a second and a bit after the last call, every
        # scrape, whichever worker answers it, has all (before, the other worker's last calls may lag)
        time.sleep(SNAPSHOT_EVERY_S * 1.5)
        for _ in range(6):  # several connections: both workers answer some of them
            text = scrape(server)[1]
            assert total(text) == calls
            assert samples(text, "mcpkit_workers") == {"mcpkit_workers": 2.0}
        prom = prometheus(server.port)
        prom.wait_for(f'sum({metric}{{gen_ai_tool_name="greet"}})', calls)


def test_metrics_is_404_without_the_flag_and_nothing_watches(hello: Any) -> None:
    with HttpServer("--plugin", "hello") as server:
        status, _, body = server.call("GET", "/metrics")
        assert status == 404 and json.loads(body)["error"]["code"] == "NOT_FOUND"
    with HttpServer("--plugin", "hello", env={"MCPKIT_METRICS": "true"}) as server:  # the setting, too
        assert scrape(server)[0] == 200


def test_refusals_are_counted_by_reason(hello: Any) -> None:
    env = {"MCPKIT_DEFAULT_TIMEOUT": "0.3", "MCPKIT_MAX_MESSAGE_BYTES": "2000"}
    with HttpServer("--plugin", "hello", "--metrics", "--auth-token", "s3cret", env=env) as server:
        auth = {"Authorization": "Bearer s3cret"}
        assert server.call("POST", "/mcp", {"jsonrpc": "2.0"}, )[0] == 401  # no token
        assert server.call("POST", "/mcp", {"jsonrpc": "2.0"}, {"Authorization": "Bearer wrong"})[0] == 401
        assert server.call("POST", "/mcp", {}, {"Origin": "http://evil.example", **auth})[0] == 403
        assert server.call("POST", "/mcp", raw=b"x" * 5000, headers=auth)[0] == 413
        status, _, body = server.rpc("tools/call", {"name": "count", "arguments": {"to": 100, "delay": 0.05}, "_meta": _meta()},
                                     headers={**auth, **modern_headers("tools/call", "count")})
        assert body["result"]["isError"] and "timed out" in body["result"]["content"][0]["text"], body
        status, text = scrape(server)  # loopback: no token needed on /metrics
        assert status == 200
        rejected = {k.split('reason="')[1].split('"')[0]: v for k, v in samples(text, "mcpkit_requests_rejected_total").items()}
        assert rejected == {"auth": 2, "origin": 1, "body": 1, "deadline": 1}, text
        counted = samples(text, "mcp_server_operation_duration_seconds_count", gen_ai_tool_name="count")
        assert list(counted.values()) == [1] and 'error_type="tool_error"' in next(iter(counted))


def test_sessions_and_streams_are_gauged(hello: Any) -> None:
    with HttpServer("--plugin", "hello", "--metrics") as server:
        sids = [server.initialize() for _ in range(3)]
        c = server.conn()
        c.request("GET", "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": sids[0],
                                          "MCP-Protocol-Version": "2025-11-25"})
        resp = c.getresponse()
        assert resp.status == 200
        text = scrape(server)[1]
        assert samples(text, "mcpkit_sessions_open") == {'mcpkit_sessions_open{mcp_transport="http"}': 3}
        assert samples(text, "mcpkit_sse_streams_open") == {'mcpkit_sse_streams_open{mcp_transport="http"}': 1}
        assert server.call("DELETE", "/mcp", headers={"Mcp-Session-Id": sids[1]})[0] == 200
        c.close()  # the stream's client leaves

        def settled() -> bool:
            t = scrape(server)[1]
            return (samples(t, "mcpkit_sessions_open").get('mcpkit_sessions_open{mcp_transport="http"}') == 2
                    and samples(t, "mcpkit_sse_streams_open").get('mcpkit_sse_streams_open{mcp_transport="http"}') == 0)

        assert wait_until(settled, 10), scrape(server)[1]
        ended = samples(scrape(server)[1], "mcp_server_session_duration_seconds_count")
        assert list(ended.values()) == [1]
        # the protocol core answers initialize itself; it is an operation like any other
        opened = samples(scrape(server)[1], "mcp_server_operation_duration_seconds_count", mcp_method_name="initialize")
        assert list(opened.values()) == [3] and 'mcp_protocol_version="2025-11-25"' in next(iter(opened)), opened


def test_metrics_from_elsewhere_need_the_token() -> None:
    """The rule of /metrics itself, with a peer address the loopback-only tests cannot have."""
    from mcpkit.server.settings import Settings
    from mcpkit.server.app import App
    from mcpkit.server.registry import Registry
    from mcpkit.server.metrics import enable_metrics
    from mcpkit.transports.http.routes import MetricsRoute

    class Peer:  # what the route reads of an exchange: who asks, and their headers
        def __init__(self, addr: str, headers: dict[str, str]) -> None:
            self.client, self.headers = (addr, 40000), headers

    app = App(Registry(), Settings(metrics=True, metrics_token="tok"))
    enable_metrics(app)
    route = MetricsRoute(app)
    assert route.allowed(Peer("127.0.0.1", {})) and route.allowed(Peer("::1", {}))
    assert not route.allowed(Peer("192.0.2.7", {}))
    assert not route.allowed(Peer("192.0.2.7", {"authorization": "Bearer nope"}))
    assert route.allowed(Peer("192.0.2.7", {"authorization": "Bearer tok"}))
    assert not route.allowed(Peer("127.0.0.1", {"x-forwarded-for": "192.0.2.7"}))  # a local proxy
    assert route.allowed(Peer("127.0.0.1", {"forwarded": "for=192.0.2.7", "authorization": "bearer tok"}))
    app2 = App(Registry(), Settings(metrics=True))
    enable_metrics(app2)
    assert not MetricsRoute(app2).allowed(Peer("192.0.2.7", {"authorization": "Bearer "}))


# -- OTLP ----------------------------------------------------------------------------------------------
class OtlpReceiver:
    """A real OTLP/HTTP endpoint: decodes every ExportMetricsServiceRequest it is sent."""

    def __init__(self) -> None:
        import http.server
        import threading

        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

        received: list[Any] = []
        self.received = received

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                data = self.rfile.read(int(self.headers["content-length"]))
                if self.path == "/v1/metrics":
                    msg = ExportMetricsServiceRequest()
                    msg.ParseFromString(data)
                    received.append(msg)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def points(self, name: str) -> list[tuple[dict[str, str], Any, dict[str, str]]]:
        """(attributes, data point, resource attributes) of every ``name`` point received."""
        out = []
        for req in list(self.received):
            for rm in req.resource_metrics:
                resource = {a.key: a.value.string_value for a in rm.resource.attributes}
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        if m.name == name:
                            data = m.histogram if m.HasField("histogram") else m.sum if m.HasField("sum") else m.gauge
                            for p in data.data_points:
                                out.append(({a.key: a.value.string_value for a in p.attributes}, p, resource))
        return out


def test_metrics_go_out_over_otlp_when_the_environment_asks(hello: Any) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra (make install puts it in the test venv)")
    receiver = OtlpReceiver()
    env = {"OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "none",
           "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}", "OTEL_METRIC_EXPORT_INTERVAL": "300"}
    with HttpServer("--plugin", "hello", env=env) as server:  # no --metrics: OTLP alone
        assert server.call("GET", "/metrics")[0] == 404
        call_greet(server, 4)
        assert server.call("POST", "/mcp", {}, {"Origin": "http://evil.example"})[0] == 403

        def greet_count() -> int:
            counts = [p.count for attrs, p, _ in receiver.points("mcp.server.operation.duration")
                      if attrs.get("gen_ai.tool.name") == "greet"]
            return counts[-1] if counts else 0

        assert wait_until(lambda: greet_count() == 4, 15), receiver.points("mcp.server.operation.duration")
        attrs, point, resource = [x for x in receiver.points("mcp.server.operation.duration")
                                  if x[0].get("gen_ai.tool.name") == "greet"][-1]
        assert attrs["mcp.method.name"] == "tools/call" and attrs["gen_ai.operation.name"] == "execute_tool"
        assert attrs["network.transport"] == "tcp" and "error.type" not in attrs
        assert list(point.explicit_bounds) == list(DURATION_BUCKETS)
        assert resource["service.name"] == "mcpkit" and resource["service.instance.id"].endswith(str(server.proc.pid))
        assert wait_until(lambda: any(a == {"reason": "origin", "mcp.transport": "http"} and p.as_int == 1
                                      for a, p, _ in receiver.points("mcpkit.requests.rejected")), 10)


def test_stdio_sessions_and_calls_go_out_over_otlp_at_exit(hello: Any) -> None:
    """Over stdio there is no /metrics: OTLP carries them, the last export when the process ends."""
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra (make install puts it in the test venv)")
    from .helpers import MCPKIT

    receiver = OtlpReceiver()
    env = {**os.environ, "OTEL_METRICS_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "none",
           "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}", "OTEL_METRIC_EXPORT_INTERVAL": "60000"}
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "greet", "arguments": {"name": "a"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "greet", "arguments": {"name": "b"}}}]
    proc = subprocess.run([MCPKIT, "serve", "--plugin", "hello"], input="".join(json.dumps(m) + "\n" for m in lines),
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 3  # initialize and both calls answered
    sessions = receiver.points("mcp.server.session.duration")
    assert [(a, p.count) for a, p, _ in sessions] == [({"network.transport": "pipe", "mcp.transport": "stdio"}, 1)]
    calls = [(a, p.count) for a, p, _ in receiver.points("mcp.server.operation.duration")
             if a.get("gen_ai.tool.name") == "greet"]
    assert len(calls) == 1 and calls[0][1] == 2 and calls[0][0]["network.transport"] == "pipe", calls


def test_legacy_sse_sessions_are_gauged_and_timed(hello: Any) -> None:
    with HttpServer("--plugin", "hello", "--metrics") as server:
        c = server.conn()
        c.request("GET", "/sse", headers={"Accept": "text/event-stream"})
        resp = c.getresponse()
        assert resp.status == 200
        text = scrape(server)[1]
        assert samples(text, "mcpkit_sessions_open") == {'mcpkit_sessions_open{mcp_transport="sse"}': 1}
        assert samples(text, "mcpkit_sse_streams_open") == {'mcpkit_sse_streams_open{mcp_transport="sse"}': 1}
        c.close()  # the client leaves: the legacy session ends with its stream

        def ended() -> bool:
            t = scrape(server)[1]
            return samples(t, "mcp_server_session_duration_seconds_count", mcp_transport="sse") != {} and \
                samples(t, "mcpkit_sessions_open") == {'mcpkit_sessions_open{mcp_transport="sse"}': 0}

        assert wait_until(ended, 10), scrape(server)[1]


def test_when_metrics_go_out_over_otlp() -> None:
    from mcpkit.server.metrics_otlp import otlp_metrics_wanted
    from mcpkit.server.settings import Settings

    plain, traced = Settings(), Settings(traces=True)
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    assert not otlp_metrics_wanted(plain, {}) and not otlp_metrics_wanted(plain, endpoint)  # set for other programs
    assert otlp_metrics_wanted(plain, {"OTEL_METRICS_EXPORTER": "otlp"})
    assert otlp_metrics_wanted(plain, {"OTEL_METRICS_EXPORTER": "console, otlp"})
    assert not otlp_metrics_wanted(traced, {}) and not otlp_metrics_wanted(traced, endpoint)  # asked for separately
    assert otlp_metrics_wanted(traced, {"OTEL_METRICS_EXPORTER": "otlp"})
    assert not otlp_metrics_wanted(traced, {"OTEL_METRICS_EXPORTER": "none"})
    assert not otlp_metrics_wanted(traced, {"OTEL_SDK_DISABLED": "true", "OTEL_METRICS_EXPORTER": "otlp"})

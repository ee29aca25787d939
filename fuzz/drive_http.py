"""The HTTP leg of the campaign: concurrent clients on one `mcpkit serve --transport http`.

Workers send stateless and session POSTs (hostile bodies, right and wrong headers), legacy
SSE exchanges they abandon, standalone GET streams they drop, DELETEs, REST search queries
and malformed HTTP on raw sockets; a prober checks /healthz twice a second.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

from common import BIN, INIT, PLUGINS, PROBE_TIMEOUT, Tally, proc_usage, server_env, well_formed
from generate import HANDSHAKE, STATELESS, JUNK_VALUES, Corpus, hostile_frame
from http_framing import PROBES as FRAMING_PROBES

ACCEPT = "application/json, text/event-stream"
RAW_HTTP = [
    b"GARBAGE\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello",
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nxx\r\n",
    b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"b" * 100000 + b"\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n folded: header\r\n\r\n",
    b"GET /healthz HTTP/1.1\nHost: 127.0.0.1\n\n",
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"",
    b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: evil.example.com\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    *FRAMING_PROBES,
]


class Server:
    def __init__(self, env: dict[str, str], log: Path, tally: Tally, args: list[str] | None = None) -> None:
        self.env, self.log, self.tally = env, log, tally
        self.args = PLUGINS if args is None else args  # what `mcpkit serve` gets besides transport and port
        self.lock = threading.Lock()
        self.start()

    def start(self) -> None:
        mark = self.log.stat().st_size if self.log.exists() else 0
        err = self.log.open("ab")
        self.proc = subprocess.Popen([str(BIN / "mcpkit"), "serve", "--transport", "http", "--port", "0", *self.args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=self.env,
                                     cwd=self.log.parent)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = re.search(rb"serving MCP on http://127\.0\.0\.1:(\d+)/mcp", self.log.read_bytes()[mark:])
            if m:
                self.port = int(m.group(1))
                return
            time.sleep(0.05)
        raise RuntimeError("the HTTP server did not start: " + self.log.read_text(errors="replace")[-2000:])

    def check_alive(self) -> None:
        with self.lock:
            if self.proc.poll() is not None:
                self.tally.crashes += 1
                self.tally.note(f"crash: exit {self.proc.returncode}")
                self.start()


class Worker:
    def __init__(self, server: Server, tally: Tally, rng: random.Random, corpus: Corpus) -> None:
        self.server, self.tally, self.rng, self.corpus = server, tally, rng, corpus
        self.conn: http.client.HTTPConnection | None = None
        self.session: str | None = None

    def _conn(self) -> http.client.HTTPConnection:
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=PROBE_TIMEOUT + 5)
        return self.conn

    def request(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes] | None:
        for attempt in range(2):
            conn = self._conn()
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                status, hdrs = resp.status, {k.lower(): v for k, v in resp.getheaders()}
                if hdrs.get("connection", "").lower() == "close":
                    self.close()
                self.record(status, hdrs, data, path)
                return status, hdrs, data
            except socket.timeout:
                self.close()
                self.tally.hangs += 1
                self.tally.note(f"hang: {method} {path} unanswered for {PROBE_TIMEOUT + 5} s: {body[:200] if body else b''!r}")
                return None
            except (http.client.HTTPException, OSError):
                self.close()  # a kept-alive connection the server closed: one retry on a new one
                self.server.check_alive()
        return None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def record(self, status: int, headers: dict[str, str], data: bytes, path: str) -> None:
        key = str(status)
        self.tally.statuses[key] = self.tally.statuses.get(key, 0) + 1
        if status >= 500 and status != 503:
            self.tally.server_errors += 1
            self.tally.note(f"{status} on {path}: {data[:200]!r}")
        elif status == 503 and b"Retry" not in data and "retry-after" not in headers:
            self.tally.server_errors += 1
            self.tally.note(f"503 without Retry-After on {path}: {data[:200]!r}")
        ctype = headers.get("content-type", "")
        if not data or not path.startswith(("/mcp", "/messages")) or path.startswith("/mcp/search"):
            return
        if ctype.startswith("text/event-stream"):
            payloads = [line[5:].strip() for line in data.split(b"\n") if line.startswith(b"data:")]
        elif ctype.startswith("application/json"):
            payloads = [data]
        else:
            return
        for payload in payloads:
            if not payload:
                continue
            try:
                msg = json.loads(payload)
            except (ValueError, RecursionError):
                self.tally.non_json += 1
                self.tally.note(f"non-JSON body on {path}: {payload[:200]!r}")
                continue
            if not well_formed(msg):
                self.tally.malformed += 1
                self.tally.note(f"malformed on {path}: {payload[:200]!r}")
            elif isinstance(msg, dict) and isinstance(msg.get("error"), dict) and msg["error"].get("code") == -32603:
                self.tally.internal += 1

    # -- actions ----------------------------------------------------------------------------------
    def stateless(self) -> None:
        frame = hostile_frame(self.rng, self.corpus, True, STATELESS, oversize=5 * 1024 * 1024)
        headers = {"Content-Type": "application/json", "Accept": ACCEPT, "MCP-Protocol-Version": STATELESS}
        try:
            msg = json.loads(frame)
            if isinstance(msg, dict) and isinstance(msg.get("method"), str):
                headers["Mcp-Method"] = msg["method"]
                params = msg.get("params")
                if isinstance(params, dict) and isinstance(params.get("name"), str) and params["name"].isascii():
                    headers["Mcp-Name"] = params["name"]
        except (ValueError, UnicodeDecodeError, RecursionError):
            pass
        if self.rng.random() < 0.1:
            headers[self.rng.choice(list(headers))] = str(self.rng.choice(JUNK_VALUES))[:100].encode("ascii", "replace").decode()
        self.request("POST", "/mcp", frame, headers)

    def in_session(self) -> None:
        if self.session is None:
            out = self.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}).encode(),
                               {"Content-Type": "application/json", "Accept": ACCEPT})
            if out and out[0] == 200 and "mcp-session-id" in out[1]:
                self.session = out[1]["mcp-session-id"]
                self.request("POST", "/mcp", b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                             {"Content-Type": "application/json", "Accept": ACCEPT, "Mcp-Session-Id": self.session})
            return
        version = self.rng.choice(HANDSHAKE)
        frame = hostile_frame(self.rng, self.corpus, False, version, oversize=5 * 1024 * 1024)
        accept = ACCEPT if self.rng.random() < 0.7 else "text/event-stream, application/json"
        out = self.request("POST", "/mcp", frame, {"Content-Type": "application/json", "Accept": accept,
                                                    "Mcp-Session-Id": self.session, "MCP-Protocol-Version": "2025-11-25"})
        if out and out[0] == 404:
            self.session = None
        elif self.rng.random() < 0.02:
            self.request("DELETE", "/mcp", None, {"Mcp-Session-Id": self.session})
            self.session = None

    def dropped_stream(self, path: str, headers: bytes = b"") -> None:
        """Open a GET stream, read a little, hang up."""
        try:
            with socket.create_connection(("127.0.0.1", self.server.port), timeout=5) as sock:
                sock.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n" + headers + b"\r\n")
                head = sock.recv(4096)
                busy = head.startswith(b"HTTP/1.1 503") and b"\r\nretry-after:" in head.lower()  # as record() rules
                if head.startswith(b"HTTP/1.1 5") and not busy:
                    self.tally.server_errors += 1
                    self.tally.note(f"5xx on GET {path}: {head[:200]!r}")
                if path == "/sse" and b"session_id=" in head:
                    sid = head.split(b"session_id=")[1].split()[0].decode(errors="replace")
                    for _ in range(self.rng.randint(1, 3)):
                        frame = hostile_frame(self.rng, self.corpus, False, "2024-11-05", oversize=1000)
                        self.request("POST", f"/messages?session_id={sid}", frame, {"Content-Type": "application/json"})
        except OSError:
            self.server.check_alive()

    def raw(self) -> None:
        try:
            with socket.create_connection(("127.0.0.1", self.server.port), timeout=5) as sock:
                sock.sendall(self.rng.choice(RAW_HTTP))
                head = sock.recv(64)
                if head.startswith(b"HTTP/1.1 5") and not head.startswith(b"HTTP/1.1 503"):
                    self.tally.server_errors += 1
                    self.tally.note(f"5xx for malformed HTTP: {head!r}")
        except socket.timeout:
            pass  # a server may wait for the rest of a partial request; its deadline is not ours to judge here
        except OSError:
            self.server.check_alive()

    def search(self) -> None:
        body = self.rng.choice([b'{"query": "frobnicate"}', b'{"query": "a\\nb"}', b'{"query": 5}', b"\xff", b"[" * 2000,
                                json.dumps({"query": "x" * 600}).encode(), b'{"query":"ok","limit":99}'])
        self.request(self.rng.choice(["POST", "POST", "GET", "PUT"]), "/mcp/search", body, {"Content-Type": "application/json"})

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.45:
            self.stateless()
        elif roll < 0.80:
            self.in_session()
        elif roll < 0.85 and self.session:
            self.dropped_stream("/mcp", f"Mcp-Session-Id: {self.session}\r\n".encode())
        elif roll < 0.90:
            self.dropped_stream("/sse")
        elif roll < 0.95:
            self.raw()
        else:
            self.search()
        self.tally.sent += 1


def run_http(seconds: float, seed: int, work: Path, workers: int = 4) -> Tally:
    tally = Tally("http")
    work.mkdir(parents=True, exist_ok=True)
    server = Server(server_env(work), work / "http-stderr.log", tally)
    return drive(server, tally, seconds, seed, workers)


def drive(server: Server, tally: Tally, seconds: float, seed: int, workers: int = 4, worker_class: type[Worker] = Worker,
          beside: tuple[Callable[[float], None], ...] = ()) -> Tally:
    """``workers`` clients and the /healthz prober against ``server`` for ``seconds`` (and each
    of ``beside``, given the time to stop at); then SIGTERM, and the tracebacks in its log."""
    corpus = _discover(server, random.Random(seed))
    stop = time.monotonic() + seconds
    warm = time.monotonic() + min(5.0, seconds / 10)

    def work_loop(n: int) -> None:
        worker = worker_class(server, tally, random.Random(seed * 100 + n), corpus)
        while time.monotonic() < stop:
            try:
                worker.step()
            except (UnicodeError, ValueError):  # the client library refused what we made up
                worker.close()
                tally.driver_errors += 1
        worker.close()

    def probe() -> None:
        while time.monotonic() < stop:
            try:
                c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=PROBE_TIMEOUT)
                c.request("GET", "/healthz")
                if c.getresponse().status != 200:
                    tally.server_errors += 1
                c.close()
            except socket.timeout:
                tally.hangs += 1
                tally.note("hang: /healthz unanswered")
            except OSError:
                server.check_alive()
            if not tally.usage_start[0] and time.monotonic() > warm:
                tally.usage_start = proc_usage(server.proc.pid)
            time.sleep(0.5)

    threads = [threading.Thread(target=work_loop, args=(n,)) for n in range(workers)] + [threading.Thread(target=probe)]
    threads += [threading.Thread(target=also, args=(stop,)) for also in beside]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(1)
    server.check_alive()
    tally.usage_end = proc_usage(server.proc.pid)
    server.proc.terminate()
    try:
        if server.proc.wait(20) != 0:
            tally.note(f"exit status {server.proc.returncode} after SIGTERM")
    except subprocess.TimeoutExpired:
        server.proc.kill()
        tally.hangs += 1
        tally.note("hang: no exit within 20 s of SIGTERM")
    tally.tracebacks = server.log.read_bytes().count(b"Traceback")
    return tally


def _discover(server: Server, rng: random.Random) -> Corpus:
    out: dict[str, Any] = {}
    for method in ("tools/list", "resources/list", "prompts/list"):
        c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}}}
        c.request("POST", "/mcp", json.dumps(body).encode(), {"Content-Type": "application/json", "Accept": ACCEPT,
                                                              "MCP-Protocol-Version": STATELESS, "Mcp-Method": method})
        out[method] = json.loads(c.getresponse().read()).get("result", {})
        c.close()
    return Corpus(rng, out["tools/list"].get("tools", []), [r["uri"] for r in out["resources/list"].get("resources", [])],
                  [p["name"] for p in out["prompts/list"].get("prompts", [])])

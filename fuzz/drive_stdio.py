"""The stdio leg of the campaign: one `mcpkit serve` process, a liveness probe after each frame."""

from __future__ import annotations

import json
import queue
import random
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from common import BIN, INIT, PLUGINS, PROBE_TIMEOUT, Tally, proc_usage, server_env, well_formed
from generate import HANDSHAKE, STATELESS, Corpus, hostile_frame


class StdioTarget:
    def __init__(self, env: dict[str, str], tally: Tally, stderr_path: Path) -> None:
        self.env, self.tally, self.stderr_path = env, tally, stderr_path
        self.probe_n = 0
        self.start()

    def start(self) -> None:
        self.stderr = self.stderr_path.open("ab")
        self.proc = subprocess.Popen([str(BIN / "mcpkit"), "serve", *PLUGINS], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, env=self.env, cwd=self.stderr_path.parent)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(self.proc, self.lines), daemon=True).start()

    @staticmethod
    def _pump(proc: subprocess.Popen[bytes], lines: queue.Queue[bytes | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    last_frame = b""

    def send(self, data: bytes) -> bool:
        if not data.startswith(b'{"jsonrpc": "2.0", "id": "probe-'):
            self.last_frame = data
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data + b"\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def _take(self, line: bytes) -> Any:
        try:
            msg = json.loads(line)
        except ValueError:
            self.tally.non_json += 1
            self.tally.note(f"non-JSON stdout line: {line[:200]!r}")
            return None
        if not well_formed(msg):
            self.tally.malformed += 1
            self.tally.note(f"malformed: {line[:200]!r}")
        for m in msg if isinstance(msg, list) else [msg]:
            if isinstance(m, dict):
                if isinstance(m.get("error"), dict) and m["error"].get("code") == -32603:
                    self.tally.internal += 1
                    self.tally.note(f"-32603 {m['error'].get('message')!r} after {self.last_frame[:200]!r}")
                if "method" in m and "id" in m:  # a server request (elicitation, sampling): decline it
                    self.send(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -1, "message": "declined"}}).encode())
        return msg

    def probe(self) -> bool:
        """Ping and wait for its answer, handling everything that arrives meanwhile."""
        self.probe_n += 1
        rid = f"probe-{self.probe_n}"
        if not self.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "ping"}).encode()):
            return self.crashed()
        deadline = time.monotonic() + PROBE_TIMEOUT
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.tally.hangs += 1
                self.tally.note(f"hang: {rid} unanswered for {PROBE_TIMEOUT} s")
                self.restart()
                return False
            if line is None:
                return self.crashed()
            msg = self._take(line)
            if isinstance(msg, dict) and msg.get("id") == rid:
                return True

    def crashed(self) -> bool:
        code = self.proc.wait()
        self.tally.crashes += 1
        self.tally.note(f"crash: exit {code}")
        self.restart()
        return False

    def restart(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.start()
        self.handshake()

    def handshake(self) -> None:
        self.send(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": INIT}).encode())
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        self.probe()

    def stop(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.tally.hangs += 1
            self.tally.note("hang: no exit within 15 s of EOF")


def run_stdio(seconds: float, seed: int, work: Path) -> Tally:
    tally = Tally("stdio")
    rng = random.Random(seed)
    env = server_env(work)
    work.mkdir(parents=True, exist_ok=True)
    target = StdioTarget(env, tally, work / "stdio-stderr.log")
    target.handshake()
    corpus = discover_stdio(target, rng)
    started = time.monotonic()
    warm = started + min(5.0, seconds / 10)
    while time.monotonic() - started < seconds:
        stateless = rng.random() < 0.5
        version = STATELESS if stateless else rng.choice(HANDSHAKE)
        frame = hostile_frame(rng, corpus, stateless, version, oversize=5 * 1024 * 1024)
        target.send(frame)
        tally.sent += 1
        target.probe()
        if not tally.usage_start[0] and time.monotonic() > warm:
            tally.usage_start = proc_usage(target.proc.pid)
    time.sleep(1)
    target.probe()
    tally.usage_end = proc_usage(target.proc.pid)
    target.stop()
    tally.tracebacks = (work / "stdio-stderr.log").read_bytes().count(b"Traceback")
    return tally


def discover_stdio(target: StdioTarget, rng: random.Random) -> Corpus:
    answers: dict[str, Any] = {}
    for method in ("tools/list", "resources/list", "prompts/list"):
        target.send(json.dumps({"jsonrpc": "2.0", "id": method, "method": method}).encode())
        deadline = time.monotonic() + 10
        while method not in answers and time.monotonic() < deadline:
            msg = target._take(target.lines.get(timeout=10) or b"null")
            if isinstance(msg, dict) and msg.get("id") == method:
                answers[method] = msg.get("result", {})
    return Corpus(rng, answers.get("tools/list", {}).get("tools", []),
                  [r["uri"] for r in answers.get("resources/list", {}).get("resources", [])],
                  [p["name"] for p in answers.get("prompts/list", {}).get("prompts", [])])



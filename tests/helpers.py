"""A real `mcpkit serve` subprocess spoken to line by line, for end-to-end tests."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MCPKIT = str(Path(sys.executable).parent / "mcpkit")
STATELESS = "2026-07-28"


def modern_meta(version: str = STATELESS, **extra: Any) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "0"},
    }
    meta.update(extra)
    return meta


class Server:
    """``mcpkit serve`` on stdio; every stdout line must be one JSON-RPC message."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        full_env = {**os.environ, **(env or {})}
        self.proc = subprocess.Popen(
            [MCPKIT, "serve", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=full_env, cwd=cwd,
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr = b""
        threading.Thread(target=self._pump, daemon=True).start()
        self._err_reader = threading.Thread(target=self._pump_err, daemon=True)
        self._err_reader.start()
        self._next_id = 1000

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr += line

    def all_stderr(self, timeout: float = 5.0) -> bytes:
        """Everything the process wrote to stderr, once it has exited (the reader thread may
        still be taking the last lines when the process is already gone)."""
        self._err_reader.join(timeout)
        return self.stderr

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def send(self, msg: dict[str, Any]) -> None:
        self.send_raw(json.dumps(msg).encode())

    def recv(self, timeout: float = 10.0) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        if line is None:
            raise EOFError(f"server closed stdout; stderr:\n{self.stderr.decode(errors='replace')}")
        return json.loads(line)  # fails the test if anything but JSON reached stdout

    def request(self, method: str, params: dict[str, Any] | None = None, *, timeout: float = 10.0) -> dict[str, Any]:
        """Send a request and return its response; notifications seen meanwhile go to .seen."""
        self._next_id += 1
        rid = self._next_id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        self.seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            reply = self.recv(max(0.01, deadline - time.monotonic()))
            if reply.get("id") == rid and "method" not in reply:
                return reply
            self.seen.append(reply)

    def initialize(self, version: str = "2025-11-25", capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.request("initialize", {
            "protocolVersion": version, "capabilities": capabilities or {},
            "clientInfo": {"name": "tests", "version": "0"},
        })
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def close(self, timeout: float = 10.0) -> int:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.proc.wait(timeout)

    def terminate(self, timeout: float = 10.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def install_plugin(folder: Path, source: str, module: str, name: str) -> dict[str, str]:
    """Install the plugin module file ``source`` into ``folder`` as ``module`` with the entry
    point ``name``; return the environment (PYTHONPATH) under which `mcpkit serve --plugin
    NAME` finds it the way it finds any installed plugin."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, folder / f"{module}.py")
    dist = module.replace("_", "-")
    info = folder / f"{module}-0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[mcpkit.plugins]\n{name} = {module}\n")
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path}

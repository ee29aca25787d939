"""Helpers for the gateway tests: config files, a gateway over stdio or HTTP, upstream servers."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .helpers import MCPKIT

HERE = Path(__file__).resolve().parent
SDK_SCRIPT = str(HERE / "sdk_fixture_server.py")
FAULTY = str(HERE / "faulty_upstream.py")
SITE = os.environ.get("PYTHONPATH", "")


def toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def write_config(path: Path, upstreams: dict[str, dict[str, Any]], server: dict[str, Any] | None = None) -> Path:
    lines = []
    if server:
        lines.append("[server]")
        lines += [f"{k} = {toml_value(v)}" for k, v in server.items()]
    for name, table in upstreams.items():
        lines.append(f"[upstreams.{name}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in table.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def sdk_stdio(**extra: Any) -> dict[str, Any]:
    return {"command": [sys.executable, SDK_SCRIPT, "stdio"], "stderr": "discard", **extra}


def faulty(mode: str, **extra: Any) -> dict[str, Any]:
    return {"command": [sys.executable, FAULTY, mode], **extra}


def conformance_fixture(**extra: Any) -> dict[str, Any]:
    return {"command": [MCPKIT, "serve", "--plugin", "conformance"], "env": {"PYTHONPATH": SITE}, "stderr": "discard", **extra}


def gateway_argv(config: Path, *args: str) -> list[str]:
    """`mcpkit serve` with the config's upstreams as its only plugins (the fixture plugins on the
    tests' path stay out), unless ``args`` select plugins themselves."""
    import tomllib

    names = list(tomllib.loads(config.read_text()).get("upstreams", {}))
    if "--plugin" not in args and "--disable" not in args:
        args = (*args, *[a for name in names for a in ("--plugin", name)])
    return [MCPKIT, "serve", "--config", str(config), *args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """A server subprocess on a loopback port, stopped (and reaped) on exit."""

    def __init__(self, argv: list[str], port: int, *, stderr: Any = subprocess.DEVNULL, env: dict[str, str] | None = None,
                 path: str = "/mcp") -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}{path}"
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, env={**os.environ, **(env or {})})
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{argv} exited with {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{argv} did not listen on {port}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        stopped(self.proc)

    def __enter__(self) -> "Process":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stopped(proc: subprocess.Popen) -> None:
    """Wait for a terminated process; kill it after 15 s."""
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def sdk_http(port: int, *extra: str) -> Process:
    return Process([sys.executable, SDK_SCRIPT, "http", str(port), *extra], port)


def healthz(port: int) -> dict[str, Any]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/healthz")
    body = json.loads(conn.getresponse().read())
    conn.close()
    return body


def children_of(pid: int) -> list[int]:
    """The live (not zombie) child processes of ``pid``, from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


def zombies_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] == "Z":
                out.append(int(entry.name))
    return out

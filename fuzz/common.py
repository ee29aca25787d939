"""What both legs of the fuzz campaign share: the tally, the server's environment, checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PROBE_TIMEOUT = 10.0
INIT = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}, "sampling": {}, "roots": {}},
        "clientInfo": {"name": "fuzz", "version": "0"}}


def proc_usage(pid: int) -> tuple[int, int]:
    """(RSS in KiB, open fds) of a process."""
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


class Tally:
    def __init__(self, transport: str) -> None:
        self.transport = transport
        self.sent = 0
        self.crashes = 0
        self.hangs = 0
        self.server_errors = 0  # HTTP 5xx
        self.non_json = 0
        self.malformed = 0  # JSON on the wire that is not a well-formed JSON-RPC message
        self.internal = 0  # -32603 answers
        self.statuses: dict[str, int] = {}
        self.usage_start: tuple[int, int] = (0, 0)
        self.usage_end: tuple[int, int] = (0, 0)
        self.tracebacks = 0
        self.leaks = 0  # answers showing internals (Redis's words, our scripts, a traceback)
        self.faults: dict[str, int] = {}  # backend faults driven meanwhile (the redis leg), by kind
        self.driver_errors = 0  # frames the campaign's own HTTP client refused to send
        self.examples: list[str] = []

    def note(self, what: str) -> None:
        if len(self.examples) < 10:
            self.examples.append(what[:300])

    def failed(self) -> bool:
        return bool(self.crashes or self.hangs or self.server_errors or self.non_json or self.malformed or self.leaks)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items()}


def well_formed(msg: Any) -> bool:
    if isinstance(msg, list):
        return all(well_formed(m) for m in msg)
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        return False
    if "method" in msg:
        return isinstance(msg["method"], str)
    if ("result" in msg) == ("error" in msg):
        return False
    err = msg.get("error")
    return err is None or (isinstance(err.get("code"), int) and isinstance(err.get("message"), str))


def server_env(work: Path) -> dict[str, str]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.hostile_plugin import plugin_env

    env = dict(os.environ)
    hostile = plugin_env(work / "site")["PYTHONPATH"]
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / ".conformance" / "site"), hostile) if p)
    env["MCPKIT_DATA_DIR"] = str(work / "data")
    env["MCPKIT_PLUGIN__CODESEARCH__ROOTS"] = json.dumps([str(work)])
    env["MCPKIT_DEFAULT_TIMEOUT"] = "2"  # requests waiting on input the campaign never gives
    return env


PLUGINS = ["--plugin", "conformance", "--plugin", "codesearch", "--plugin", "openapi", "--plugin", "hostile"]


def stop_server(proc: "subprocess.Popen[bytes]", stderr: Any) -> None:
    """End a stdio server the way a host does (close its input), kill it if it lingers, and
    close the file its stderr went to."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(15)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()
    stderr.close()

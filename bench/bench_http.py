"""HTTP benchmark: tools/call throughput, mcpkit vs the official SDK, side by side in one run.

Two comparisons, each with 8 keep-alive connections driven by wrk (Debian package `wrk`):
  * stateless: 2026-07-28 requests (headers + _meta), JSON answers — mcpkit vs SDK stateless_http+json_response;
  * stateful: a handshake-era session (Mcp-Session-Id) — mcpkit's default vs the SDK's default (SSE-framed).
Also the server CPU per call (from /proc). Run: `make bench-http` or `.venv/bin/python bench/bench_http.py [--seconds 10]`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
#: The hello plugin is a test fixture outside the venv (`make fixtures`): on the servers' path.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent / ".conformance" / "site"),
                                                         os.environ.get("PYTHONPATH")]))
TICK = os.sysconf("SC_CLK_TCK")
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"}}
CALL = {"name": "greet", "arguments": {"name": "bench"}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def wait_port(port: int, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listening on {port}")


def start(kind: str, mode: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    if kind == "mcpkit":
        cmd = [str(BIN / "mcpkit"), "serve", "--transport", "http", "--port", str(port), "--plugin", "hello"]
    else:
        cmd = [sys.executable, str(HERE / "sdk_http_server.py"), str(port), mode]
    env = dict(os.environ, MCPKIT_LOG_LEVEL="error")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wait_port(port)
    return proc, port


def session_for(port: int) -> str:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
    c.request("POST", "/mcp", json.dumps(body), {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    r = c.getresponse()
    sid = r.getheader("mcp-session-id")
    r.read()
    c.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
              {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    c.getresponse().read()
    return sid


def lua_script(headers: dict[str, str], body: dict) -> str:
    hdrs = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items())
    return f'wrk.method = "POST"\nwrk.body = {json.dumps(json.dumps(body))}\n{hdrs}\n'


def check_once(port: int, headers: dict[str, str], body: dict) -> None:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", "/mcp", json.dumps(body), headers)
    r = c.getresponse()
    text = r.read().decode()
    assert r.status == 200 and "Hello, bench." in text, (r.status, text[:300])


def run_wrk(port: int, headers: dict[str, str], body: dict, seconds: float, pid: int) -> tuple[float, float]:
    check_once(port, headers, body)
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(lua_script(headers, body))
    cpu0 = cpu_seconds(pid)
    out = subprocess.run(["wrk", "-t2", "-c8", f"-d{max(1, round(seconds))}s", "-s", f.name, f"http://127.0.0.1:{port}/mcp"],
                         capture_output=True, text=True, check=True).stdout
    cpu = cpu_seconds(pid) - cpu0
    os.unlink(f.name)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    assert non2xx is None, out
    return rps, cpu / max(total, 1) * 1e6


def bench(kind: str, mode: str, seconds: float) -> tuple[float, float]:
    proc, port = start(kind, mode)
    try:
        base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if mode == "stateless-json":
            headers = {**base, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "greet"}
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {**CALL, "_meta": META}}
        else:
            headers = {**base, "Mcp-Session-Id": session_for(port), "MCP-Protocol-Version": "2025-11-25"}
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": CALL}
        run_wrk(port, headers, body, min(2.0, seconds), proc.pid)  # warm-up
        return run_wrk(port, headers, body, seconds, proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("bench_http needs wrk: apt-get install wrk")
    print(f"machine: {os.cpu_count()} cores; wrk -t2 -c8 for {args.seconds:g} s per server; tools/call greet")
    print(f"{'':34}{'mcpkit':>14}{'sdk':>14}{'ratio':>8}")
    for mode, label in (("stateless-json", "stateless (2026-07-28), JSON"), ("default", "stateful session, default mode")):
        ours, sdk = bench("mcpkit", mode, args.seconds), bench("sdk", mode, args.seconds)
        print(f"{label + ' calls/s':34}{ours[0]:14.0f}{sdk[0]:14.0f}{ours[0] / sdk[0]:8.2f}")
        print(f"{'  server CPU per call (us)':34}{ours[1]:14.0f}{sdk[1]:14.0f}{ours[1] / sdk[1]:8.2f}")


if __name__ == "__main__":
    main()

"""What the console costs a server: server CPU per stateless ``tools/call`` over HTTP with the
console off, on with nobody watching, and on with one page's event stream open (issue 25).

Each configuration is a real ``mcpkit serve --transport http`` subprocess (access log off) serving
tests/console_plugin.py; one keep-alive client makes CALLS calls of ``repeat``; the server's
user+system CPU time comes from /proc. The configurations take turns over ROUNDS rounds (a machine
that speeds up or slows down weighs on all alike); the table shows the median per configuration.

Run: ``.venv/bin/python bench/bench_console.py [--calls N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MCPKIT = str(Path(sys.executable).parent / "mcpkit")
PLUGIN = str(ROOT / "tests" / "console_plugin.py")
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "repeat"}
CONFIGS = {"console off": [], "console on, no viewer": ["--console"], "console on, one viewer": ["--console"]}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(name: str, calls: int) -> float:
    proc = subprocess.Popen([MCPKIT, "serve", "--transport", "http", "--port", "0", PLUGIN, "--plugin", "console_plugin",
                             *CONFIGS[name]], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "MCPKIT_ACCESS_LOG": "false"})
    try:
        assert proc.stderr is not None
        port = 0
        for line in proc.stderr:
            m = re.search(rb"serving MCP on http://127\.0\.0\.1:(\d+)/mcp", line)
            if m:
                port = int(m.group(1))
                break
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
        viewer = None
        if name.endswith("one viewer"):  # a page's event stream, read as fast as it comes
            viewer = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            viewer.request("GET", "/console/events")
            resp = viewer.getresponse()
            def drain() -> None:
                try:
                    while resp.read1(65536):
                        pass
                except (OSError, AttributeError, ValueError):  # closed at the end
                    pass

            threading.Thread(target=drain, daemon=True).start()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "repeat", "arguments": {"word": "w", "times": 2}, "_meta": META}})
        for _ in range(200):  # warm up
            conn.request("POST", "/mcp", body=body, headers=HEADERS)
            conn.getresponse().read()
        before = cpu_seconds(proc.pid)
        for _ in range(calls):
            conn.request("POST", "/mcp", body=body, headers=HEADERS)
            resp2 = conn.getresponse()
            assert resp2.status == 200
            resp2.read()
        used = cpu_seconds(proc.pid) - before
        conn.close()
        if viewer is not None:
            viewer.close()
        return used / calls * 1e6
    finally:
        proc.terminate()
        proc.wait(20)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[float]] = {name: [] for name in CONFIGS}
    for r in range(args.rounds):
        order = list(CONFIGS) if r % 2 == 0 else list(reversed(CONFIGS))
        for name in order:
            results[name].append(run(name, args.calls))
            time.sleep(0.5)
    base = statistics.median(results["console off"])
    print(f"server CPU per stateless tools/call, {args.calls} calls x {args.rounds} rounds, median (all rounds):")
    for name, values in results.items():
        med = statistics.median(values)
        print(f"  {name:24} {med:7.1f} us  ({(med / base - 1) * 100:+5.1f} %)  [{', '.join(f'{v:.1f}' for v in values)}]")


if __name__ == "__main__":
    main()

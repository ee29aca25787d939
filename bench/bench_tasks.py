"""Tasks benchmark: tasks/get latency with many tasks stored, and what making a task costs.

    .venv/bin/python bench/bench_tasks.py [--tasks 10000] [--gets 3000] [--calls 2000]

Runs `mcpkit serve --transport http --plugin conformance` (SQLite task store, a fresh data
folder) and talks to it over one keep-alive connection:
  * stores --tasks finished tasks (slow_compute with seconds=0, escalated at once), then times
    --gets tasks/get of random ids among them: p50 / p99 / max, in ms, client side;
  * times --calls tools/call of the same tool answered synchronously (no tasks extension) and
    as tasks (extension declared, task_escalate_ms=0): the difference is the cost of a task.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = Path(sys.executable).parent
TASKS = {"io.modelcontextprotocol/tasks": {}}


def meta(tasks: bool) -> dict:
    caps: dict = {"extensions": TASKS} if tasks else {}
    return {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps}


class Conn:
    def __init__(self, port: int) -> None:
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def rpc(self, method: str, params: dict, name: str | None, tasks: bool) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
        if name:
            headers["Mcp-Name"] = name
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta(tasks)}})
        self.c.request("POST", "/mcp", body, headers)
        reply = json.loads(self.c.getresponse().read())
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["result"]


def start_server(data: Path) -> tuple[subprocess.Popen, int]:
    env = dict(os.environ, MCPKIT_DATA_DIR=str(data), MCPKIT_TASK_ESCALATE_MS="0", MCPKIT_LOG_LEVEL="error",
               MCPKIT_ACCESS_LOG="false", MCPKIT_MAX_TASKS_PER_PRINCIPAL="100000", MCPKIT_MAX_LIVE_TASKS="100000",
               PYTHONPATH=str(ROOT / ".conformance" / "site"))
    log = data / "server.log"
    proc = subprocess.Popen([str(BIN / "mcpkit"), "serve", "--transport", "http", "--port", "0", "--plugin", "conformance"],
                            stdout=subprocess.DEVNULL, stderr=log.open("wb"), env=env)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        m = re.search(rb"http://127\.0\.0\.1:(\d+)/mcp", log.read_bytes())
        if m:
            return proc, int(m.group(1))
        time.sleep(0.05)
    raise RuntimeError("the server did not start")


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--gets", type=int, default=3_000)
    ap.add_argument("--calls", type=int, default=2_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcpkit-bench-tasks-") as tmp:
        proc, port = start_server(Path(tmp))
        try:
            conn = Conn(port)
            call = {"name": "slow_compute", "arguments": {"seconds": 0, "label": "b"}}
            t0 = time.perf_counter()
            ids = [conn.rpc("tools/call", call, "slow_compute", True)["taskId"] for _ in range(args.tasks)]
            made = time.perf_counter() - t0
            get_ms = []
            for task_id in random.choices(ids, k=args.gets):
                t = time.perf_counter()
                assert conn.rpc("tasks/get", {"taskId": task_id}, task_id, True)["status"] == "completed"
                get_ms.append((time.perf_counter() - t) * 1000)
            sync_ms, task_ms = [], []
            for i in range(args.calls):  # alternate, so drift hits both alike
                t = time.perf_counter()
                assert "content" in conn.rpc("tools/call", call, "slow_compute", False)
                sync_ms.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                assert conn.rpc("tools/call", call, "slow_compute", True)["resultType"] == "task"
                task_ms.append((time.perf_counter() - t) * 1000)
            size = (Path(tmp) / "tasks.sqlite3").stat().st_size
        finally:
            proc.terminate()
            proc.wait(10)
    print(f"machine: {os.cpu_count()} CPUs; SQLite task store; one keep-alive HTTP connection, client-side times")
    print(f"stored {args.tasks:,} tasks in {made:.1f} s ({made / args.tasks * 1000:.2f} ms each); store file {size / 2**20:.1f} MiB")
    print(f"tasks/get with {args.tasks:,} stored ({args.gets:,} random ids): p50 {statistics.median(get_ms):.2f} ms, "
          f"p99 {pct(get_ms, 0.99):.2f} ms, max {max(get_ms):.2f} ms")
    s50, t50 = statistics.median(sync_ms), statistics.median(task_ms)
    print(f"tools/call x{args.calls:,}: synchronous p50 {s50:.2f} ms (p99 {pct(sync_ms, 0.99):.2f}); as a task p50 {t50:.2f} ms "
          f"(p99 {pct(task_ms, 0.99):.2f}): a task costs {t50 - s50:+.2f} ms at the median")


if __name__ == "__main__":
    main()

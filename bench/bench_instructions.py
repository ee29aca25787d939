"""Instructions per stateless tools/call, counted by valgrind: a figure that does not move with
whatever else this VM is doing, for telling a change of 1-2 % from noise.

    .venv/bin/python bench/bench_instructions.py [--variants floor,off,traces,traces-none] [--calls 2048]
                                                  [--baseline DIR] [--rounds 1]

The CPU-time benches (bench_http, bench_telemetry) answer the issues' goals, which are in µs; on
this shared 2-CPU VM their per-round ratios swing by ±10-30 % and a slow hour shifts every figure
by 1.4-2×, so a change worth a few per cent cannot be seen there. Here each server runs under
``valgrind --tool=callgrind`` (every thread counted, the span exporter's too); a client on one
keep-alive connection sends warm-up calls, the counters are zeroed (``callgrind_control -z``),
``--calls`` more calls go through, and the counters are dumped: instructions per call, the same
from one run to the next within a fraction of a per cent.

Variants (the bench_telemetry names; ``main-*`` with ``--baseline DIR``: the mcpkit package in
DIR, e.g. ``git archive REV mcpkit`` unpacked):
  * floor        bench/http_floor_server.py, what a call cannot cost less than on trio
  * off          `mcpkit serve --transport http --plugin hello`, telemetry off
  * traces       with --traces, spans exported over OTLP/HTTP to a sink in this process
                 (full batches of 512 only: the number of exports in the window is calls / 512)
  * traces-none  with --traces and OTEL_TRACES_EXPORTER=none
  * main, main-traces, main-traces-none: the same on DIR's package

Instructions are not time: cache misses and branch mispredictions (what makes the same span code
cost 2-3× more inside the server than in a loop) do not show here. Use this to compare two
versions of the code, and the CPU benches for the goals.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_http import BIN, HERE, META, free_port, wait_port
from bench_telemetry import start_sink

CALL = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "greet", "arguments": {"name": "bench"}, "_meta": META}})
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "greet"}
WARMUP = 512
VARIANTS = ("floor", "off", "traces", "traces-none")


def command(variant: str, port: int, sink: int, baseline: str | None) -> tuple[list[str], dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(MCPKIT_LOG_LEVEL="error", PYTHONDONTWRITEBYTECODE="1")
    if variant == "floor":
        return [sys.executable, str(HERE / "http_floor_server.py"), str(port)], env
    kind = variant.removeprefix("main-") if variant != "main" else "off"
    if variant.startswith("main"):
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [baseline, env.get("PYTHONPATH")]))
    cmd = [str(BIN / "mcpkit"), "serve", "--transport", "http", "--port", str(port), "--plugin", "hello"]
    if kind.startswith("traces"):
        cmd.append("--traces")
        env.update(OTEL_SERVICE_NAME="bench", OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{sink}",
                   OTEL_TRACES_EXPORTER="none" if kind == "traces-none" else "otlp",
                   OTEL_BSP_SCHEDULE_DELAY="600000")  # full batches only: a known number of exports
    return cmd, env


def calls(port: int, n: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        for _ in range(n):
            conn.request("POST", "/mcp", CALL, HEADERS)
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200 or b"Hello, bench." not in body:
                raise RuntimeError(f"unexpected answer {resp.status}: {body[:200]!r}")
    finally:
        conn.close()


def _counts(dump_dir: Path, pid: int) -> dict[str, int]:
    """The event counts in the last dump callgrind wrote for ``pid`` (``callgrind_control -d``
    writes part files ``.1``, ``.2`` ...: each holds the events since the zeroing or the dump
    before): ``Ir`` (instructions) and, with the simulators on, cache and branch misses."""
    parts = sorted(dump_dir.glob(f"callgrind.out.{pid}.*"), key=lambda p: int(p.suffix[1:]))
    if not parts:
        return {}
    text = parts[-1].read_text(errors="replace")
    events = re.search(r"^events: (.+)$", text, re.M)
    totals = re.search(r"^(?:summary|totals): (.+)$", text, re.M)
    if not events or not totals:
        return {}
    return dict(zip(events.group(1).split(), (int(x) for x in totals.group(1).split())))


def wrk_calls(port: int, conns: int, seconds: int) -> int:
    """``conns`` keep-alive connections for ``seconds`` (wrk): how many calls were answered."""
    script = "".join(f'wrk.headers["{k}"] = "{v}"\n' for k, v in HEADERS.items())
    script += f'wrk.method = "POST"\nwrk.body = {json.dumps(CALL)}\n'
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
    try:
        out = subprocess.run(["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--timeout", "30s", "-s", f.name,
                              f"http://127.0.0.1:{port}/mcp"], capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    if "Non-2xx" in out:
        raise RuntimeError(f"wrk saw errors: {out}")
    return int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]


def measure(variant: str, n: int, sink: int, baseline: str | None, simulate: bool = False,
            conns: int = 1) -> dict[str, float]:
    """Events per call (instructions; with ``simulate``, cache and branch misses too) of one
    server under callgrind."""
    port = free_port()
    cmd, env = command(variant, port, sink, baseline)
    with tempfile.TemporaryDirectory(prefix="mcpkit-callgrind-") as tmp:
        out = Path(tmp)
        vg = ["valgrind", "--tool=callgrind", "--vgdb=yes", "--dump-instr=no", "--compress-strings=no",
              f"--callgrind-out-file={out}/callgrind.out.%p"]
        if simulate:
            vg += ["--cache-sim=yes", "--branch-sim=yes"]
        proc = subprocess.Popen(vg + cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port, variant, proc, seconds=240)
            calls(port, WARMUP)
            time.sleep(1.0)  # the exporter's batch of the warm-up calls, done before the zeroing
            subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, capture_output=True, timeout=120)
            if conns == 1:
                calls(port, n)
            else:  # wrk for as long as one connection would take for n calls, roughly
                n = wrk_calls(port, conns, max(5, n // 100))
            time.sleep(1.0)  # the exporter's batches of these calls
            subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, capture_output=True, timeout=120)
            counts = _counts(out, proc.pid)
        finally:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if not counts.get("Ir"):
            raise RuntimeError(f"{variant}: callgrind wrote no counts")
        return {k: v / n for k, v in counts.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="floor,off,traces,traces-none")
    ap.add_argument("--calls", type=int, default=2048, help="calls counted per server (a multiple of 512 keeps "
                                                          "the exports in the window whole)")
    ap.add_argument("--baseline", metavar="DIR", help="a folder holding another mcpkit package: adds main-* variants")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--conns", type=int, default=1,
                    help="more than 1: wrk on that many connections (for about calls/100 s) instead of one client")
    ap.add_argument("--simulate", action="store_true",
                    help="also simulate the caches and branch predictors (slower): misses per call")
    args = ap.parse_args()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}: choose from {', '.join(VARIANTS)}")
    if args.baseline:
        variants += ["main" if v == "off" else f"main-{v}" for v in variants if v != "floor"]
    sink = start_sink()
    res: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for r in range(args.rounds):
        for v in variants:
            res[v].append(measure(v, args.calls, sink, args.baseline, args.simulate, args.conns))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    best = {v: min(rows, key=lambda c: c["Ir"]) for v, rows in res.items()}
    base, floor = best.get("off"), best.get("floor")
    load = f"one keep-alive connection, {args.calls} calls" if args.conns == 1 else f"wrk, {args.conns} connections"
    print(f"instructions per stateless tools/call (callgrind, {load} after {WARMUP} warm-up calls; "
          "every thread counted, user space only)")
    print("| variant | instructions/call | rounds | × off | × floor |")
    print("|---|---|---|---|---|")
    for v, rows in res.items():
        ir = best[v]["Ir"]
        each = " ".join(f"{c['Ir']:,.0f}" for c in rows)
        per_off = f"{ir / base['Ir']:.3f}" if base else ""
        per_floor = f"{ir / floor['Ir']:.2f}" if floor else ""
        print(f"| {v} | {ir:,.0f} | {each} | {per_off} | {per_floor} |")
    if args.simulate:
        print("\nsimulated misses per call: I1 / LL instruction, D1 / LL data (reads + writes), branches")
        print("| variant | I1 miss | LL i-miss | D1 miss | LL d-miss | branch miss |")
        print("|---|---|---|---|---|---|")
        for v, c in best.items():
            print(f"| {v} | {c.get('I1mr', 0):,.0f} | {c.get('ILmr', 0):,.0f} | {c.get('D1mr', 0) + c.get('D1mw', 0):,.0f} | "
                  f"{c.get('DLmr', 0) + c.get('DLmw', 0):,.0f} | {c.get('Bcm', 0) + c.get('Bim', 0):,.0f} |")

if __name__ == "__main__":
    main()

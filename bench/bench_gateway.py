"""Gateway benchmark: a stateless tools/call of a trivial tool, side by side in one run.

    .venv/bin/python bench/bench_gateway.py [--seconds 5] [--rounds 3] [--conns 8]

Servers, all behind Streamable HTTP on loopback and driven by wrk (2026-07-28 stateless
requests, keep-alive connections), measured in alternating rounds:
  * direct          `mcpkit serve --transport http --plugin hello`: the tool served by mcpkit itself
  * gateway-stdio   mcpkit's gateway, the same hello server as an upstream over stdio (prefix "")
  * gateway-http    mcpkit's gateway, an upstream `mcpkit serve --transport http --plugin hello`
  * fastmcp-stdio   FastMCP's proxy (create_proxy) in front of the same stdio upstream
  * fastmcp-http    FastMCP's proxy in front of the same HTTP upstream
With ``--before DIR`` (a folder holding another mcpkit package, e.g. ``git archive main mcpkit |
tar -x -C DIR``), each of the chosen mcpkit servers runs a second time as ``KIND@before`` with
that package first on PYTHONPATH (the gateway and its stdio upstream both), in the same
alternating rounds: a before/after comparison in one run.
Figures (medians over the rounds): requests/s, CPU per call of the front process (the gateway
or proxy, from /proc; the upstream's own CPU is not counted), p50 and p99 latency; the gateway's
added CPU per call (gateway CPU minus direct CPU) and the ratios against FastMCP.
FastMCP (a benchmark-only dependency) is installed into .bench/fastmcp-venv on first use.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_http import META, Server, free_port, run_wrk

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = Path(sys.executable).parent
SITE = str(ROOT / ".conformance" / "site")
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [SITE, os.environ.get("PYTHONPATH")]))
FASTMCP_VENV = ROOT / ".bench" / "fastmcp-venv"
HELLO_STDIO = [str(BIN / "mcpkit"), "serve", "--plugin", "hello"]
CALL_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "greet"}
CALL_BODY = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
             "params": {"name": "greet", "arguments": {"name": "bench"}, "_meta": META}}
KINDS = ("direct", "gateway-stdio", "gateway-http", "fastmcp-stdio", "fastmcp-http")


def fastmcp_python() -> str:
    py = FASTMCP_VENV / "bin" / "python"
    if not py.exists():
        print("installing FastMCP into .bench/fastmcp-venv (benchmark only)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(FASTMCP_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-qq", "fastmcp"], check=True, stdout=sys.stderr)
    return str(py)


class Front:
    """One server under test, listening on its own port."""

    def __init__(self, kind: str, argv: list[str], port: int, env: dict[str, str] | None = None) -> None:
        self.kind, self.port = kind, port
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "MCPKIT_LOG_LEVEL": "error", **(env or {})})
        end = time.monotonic() + 60
        import socket

        while time.monotonic() < end:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                time.sleep(0.5)  # the gateway's upstream is connected before it listens; FastMCP's lazily
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{kind} did not start")

    stop = Server.stop


def start_all(tmp: Path, kinds: tuple[str, ...], protocol: str = "auto",
              before: str | None = None) -> tuple[dict[str, Front], list[Front]]:
    up_port = free_port()
    upstream = Front("upstream-http", [str(BIN / "mcpkit"), "serve", "--transport", "http", "--port", str(up_port),
                                       "--plugin", "hello"], up_port)
    up_url = f"http://127.0.0.1:{up_port}/mcp"
    stdio_cfg = tmp / "gw-stdio.toml"
    stdio_cfg.write_text(f'[upstreams.hello_up]\ncommand = {json_list(HELLO_STDIO)}\nprefix = ""\nprotocol = "{protocol}"\n')
    http_cfg = tmp / "gw-http.toml"
    http_cfg.write_text(f'[upstreams.hello_up]\nurl = "{up_url}"\nprefix = ""\nprotocol = "{protocol}"\n')
    fpy = fastmcp_python() if any(k.startswith("fastmcp") for k in kinds) else ""
    fronts: dict[str, Front] = {}
    old_env = {"PYTHONPATH": os.pathsep.join(filter(None, [before, os.environ.get("PYTHONPATH")]))} if before else None
    for name in kinds:
        kind, _, tag = name.partition("@")
        port = free_port()
        serve = [str(BIN / "mcpkit"), "serve", "--transport", "http", "--port", str(port)]
        argv = {
            "direct": [*serve, "--plugin", "hello"],
            "gateway-stdio": [*serve, "--config", str(stdio_cfg), "--plugin", "hello_up"],
            "gateway-http": [*serve, "--config", str(http_cfg), "--plugin", "hello_up"],
            "fastmcp-stdio": [fpy, str(HERE / "fastmcp_proxy.py"), str(port), "stdio", *HELLO_STDIO],
            "fastmcp-http": [fpy, str(HERE / "fastmcp_proxy.py"), str(port), "http", up_url],
        }[kind]
        fronts[name] = Front(name, argv, port, old_env if tag == "before" else None)
    return fronts, [upstream]


def json_list(items: list[str]) -> str:
    import json

    return json.dumps(items)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--upstream-protocol", default="auto", help="the gateway's protocol setting for its upstreams")
    ap.add_argument("--only", default=",".join(KINDS), help="the servers to run, comma-separated (default: all)")
    ap.add_argument("--before", help="also run the chosen mcpkit servers on the mcpkit package in this folder "
                                     "(`git archive REV mcpkit | tar -x -C DIR`), as KIND@before")
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("bench_gateway needs wrk (Debian package wrk; `make bench-http` installs it)")
    kinds = tuple(k for k in KINDS if k in args.only.split(","))
    if args.before:
        kinds += tuple(f"{k}@before" for k in kinds if not k.startswith("fastmcp"))
    results: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        fronts, others = start_all(Path(tmp), kinds, args.upstream_protocol, args.before)
        try:
            for kind in kinds:  # warm-up (FastMCP connects its upstream on first use)
                run_wrk(fronts[kind], CALL_HEADERS, CALL_BODY, args.conns, 1)
            for rnd in range(args.rounds):
                order = kinds if rnd % 2 == 0 else tuple(reversed(kinds))
                for kind in order:
                    results[kind].append(run_wrk(fronts[kind], CALL_HEADERS, CALL_BODY, args.conns, args.seconds))
                print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)
        finally:
            for front in [*fronts.values(), *others]:
                front.stop()
    report(results, args)


def report(results: dict[str, list[dict[str, float]]], args: argparse.Namespace) -> None:
    med = {k: {m: statistics.median(r[m] for r in runs) for m in runs[0]} for k, runs in results.items()}
    print(f"machine: {os.cpu_count()} CPUs; wrk -c{args.conns}, {args.seconds:g} s per run, {args.rounds} alternating "
          f"rounds, medians; CPU is the front process's only")
    print("| server | req/s | CPU µs/call | p50 ms | p99 ms |\n|---|---|---|---|---|")
    for kind in med:
        m = med[kind]
        print(f"| {kind} | {m['rps']:,.0f} | {m['cpu_us']:.0f} | {m['p50_ms']:.2f} | {m['p99_ms']:.2f} |")
    for via in ("stdio", "http"):
        if not {f"gateway-{via}", f"fastmcp-{via}", "direct"} <= set(med):
            continue
        g, f, d = med[f"gateway-{via}"], med[f"fastmcp-{via}"], med["direct"]
        print(f"{via} upstream: gateway adds {g['cpu_us'] - d['cpu_us']:.0f} µs CPU per call over direct; "
              f"{g['rps'] / f['rps']:.1f}x FastMCP's calls/s at {g['cpu_us'] / f['cpu_us']:.2f}x its CPU per call")
    for tag in ("", "@before"):
        gw, direct = f"gateway-stdio{tag}", f"direct{tag}"
        if not {gw, direct} <= set(results):
            continue
        per_round = [r["cpu_us"] - d["cpu_us"] for r, d in zip(results[gw], results[direct])]
        print(f"added CPU per call over stdio{tag}: {med[gw]['cpu_us'] - med[direct]['cpu_us']:.0f} µs "
              f"(medians); per round: " + " ".join(f"{v:.0f}" for v in per_round))


if __name__ == "__main__":
    main()

"""`mcpkit dev` reload time: from a save of the plugin file to the new tool answering a client.

A real `mcpkit dev ./bench_plugin.py` on stdio with mcpkit's client connected (handshake era).
Each round saves a new version of the file that adds a tool (as an editor saves: a new file
renamed over the old one), then calls that tool every 5 ms until it answers; the time from the
rename to the first answer is the round's figure. The server's own figure (the import, the
checks, the swap: "reloaded ... in N ms" on its stderr) is reported next to it. Both watchers
are measured: watchfiles (the [dev] extra) and the polling fallback (--poll).

Run: `.venv/bin/python bench/bench_reload.py [--rounds N] [--tools K]` (K tools in the file, for
a plugin bigger than one tool).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

import mcpkit.client as mc
from mcpkit.client.errors import InvalidParams
from mcpkit.client.transports.stdio import StdioTransport

MCPKIT = str(Path(sys.executable).parent / "mcpkit")


def plugin(version: int, tools: int) -> str:
    defs = "".join(f'''
@mcpkit.tool
def tool_{i}(text: str = "") -> str:
    """Tool {i}."""
    return "{i}"
''' for i in range(tools))
    return f'''import mcpkit
{defs}
@mcpkit.tool
def new_{version}() -> str:
    """The tool this version adds."""
    return "v{version}"


@mcpkit.hookimpl
def mcpkit_tools(config):
    return [{", ".join([*(f"tool_{i}" for i in range(tools)), f"new_{version}"])}]
'''


async def measure(watcher: str, rounds: int, tools: int) -> tuple[list[float], list[float]]:
    folder = Path(tempfile.mkdtemp())
    path, err_path = folder / "bench_plugin.py", folder / "stderr"
    path.write_text(plugin(0, tools))
    command = [MCPKIT, "dev", str(path), "--plugin", "bench_plugin", *(["--poll"] if watcher == "polling" else [])]
    client_ms: list[float] = []
    with err_path.open("wb") as err:
        async with mc.connect(command, transport=StdioTransport(command, stderr=err), mode="handshake") as client:
            await trio.sleep(1.0)  # the watcher is up
            for version in range(1, rounds + 1):
                tmp = folder / ".bench_plugin.py.new"
                tmp.write_text(plugin(version, tools))
                start = time.perf_counter()
                os.replace(tmp, path)
                while True:
                    try:
                        result = await client.call_tool(f"new_{version}", {}, validate=False)
                        if result.text == f"v{version}":
                            break
                    except InvalidParams:
                        pass
                    if time.perf_counter() - start > 10:
                        raise RuntimeError(f"version {version} never answered; stderr:\n{err_path.read_text()}")
                    await trio.sleep(0.005)
                client_ms.append((time.perf_counter() - start) * 1000)
                await trio.sleep(0.3)  # one save at a time
    server_ms = [float(m) for m in re.findall(r"reloaded bench_plugin in (\d+) ms", err_path.read_text())]
    return client_ms, server_ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--tools", type=int, default=1)
    args = parser.parse_args()
    print(f"mcpkit dev reload, {args.rounds} saves, a plugin of {args.tools + 1} tools, {os.cpu_count()} CPUs")
    print(f"{'watcher':<11} {'save -> answering: median':>26} {'p90':>7} {'max':>7}   {'server reload: median':>22} {'max':>6}")
    for watcher in ("watchfiles", "polling"):
        client_ms, server_ms = trio.run(measure, watcher, args.rounds, args.tools)
        p90 = statistics.quantiles(client_ms, n=10)[-1]
        print(f"{watcher:<11} {statistics.median(client_ms):>23.0f} ms {p90:>4.0f} ms {max(client_ms):>4.0f} ms"
              f"   {statistics.median(server_ms):>19.0f} ms {max(server_ms):>3.0f} ms")


if __name__ == "__main__":
    main()

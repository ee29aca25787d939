"""A newcomer's path, timed: from `pip install mcpkit` to a tool answering in a host.

Every step is what a new user runs, in a fresh virtual environment outside this checkout:

  1. `python3 -m venv` and `pip install --find-links DIST 'mcpkit[dev]'` (mcpkit from this project's
     wheels, `make dist`; its dependencies from the package index, through pip's cache unless
     --no-cache),
  2. write a one-file tool (the one docs/getting-started.md shows),
  3. `mcpkit install mcp-json ./weather.py --file host.json` (the host's config entry),
  4. a host starts the entry's command and calls the tool: here the official SDK's client (a
     program nobody here wrote, in this checkout's venv, as a host has its own runtime) reads
     host.json, starts the server and calls `outlook`.

The typing a person does is not timed (the file is written at once); what is timed is what the
machine makes them wait for. Run: `.venv/bin/python bench/bench_first_tool.py [--dist DIR] [--no-cache]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOL = '''\
import mcpkit


@mcpkit.tool
def outlook(city: str) -> str:
    """Tomorrow's weather for a city."""
    return f"{city}: sunny, 21 °C"


@mcpkit.hookimpl
def mcpkit_tools(config):
    return [outlook]
'''


def step(name: str, times: list[tuple[str, float]], *cmd: str, cwd: Path | None = None) -> None:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    times.append((name, time.perf_counter() - start))


async def host_calls(config: Path) -> str:
    from mcp import Client, StdioServerParameters

    entry = json.loads(config.read_text())["mcpServers"]["weather"]
    params = StdioServerParameters(command=entry["command"], args=entry["args"])
    async with Client(params, mode="legacy") as client:
        result = await client.call_tool("outlook", {"city": "Oslo"})
        return result.content[0].text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dist", type=Path, default=ROOT / "dist")
    parser.add_argument("--no-cache", action="store_true", help="pip downloads every dependency again")
    args = parser.parse_args()
    wheels = sorted(args.dist.glob("mcpkit-*.whl"))
    if not wheels:
        sys.exit(f"no mcpkit wheel in {args.dist}: run `make dist` first")
    home = Path(tempfile.mkdtemp(prefix="newcomer-"))
    times: list[tuple[str, float]] = []
    begin = time.perf_counter()
    step("python3 -m venv", times, sys.executable, "-m", "venv", str(home / "venv"))
    pip = [str(home / "venv/bin/pip"), "install", "-q", "--find-links", str(args.dist)]
    step("pip install 'mcpkit[dev]'", times, *pip, *(["--no-cache-dir"] if args.no_cache else []), "mcpkit[dev]")
    start = time.perf_counter()
    (home / "weather.py").write_text(TOOL)
    times.append(("write weather.py", time.perf_counter() - start))
    step("mcpkit install mcp-json ./weather.py", times, str(home / "venv/bin/mcpkit"), "install", "mcp-json",
         "./weather.py", "--file", str(home / "host.json"), cwd=home)
    start = time.perf_counter()
    answer = asyncio.run(host_calls(home / "host.json"))
    times.append(("host starts it, calls outlook", time.perf_counter() - start))
    total = time.perf_counter() - begin
    assert answer == "Oslo: sunny, 21 °C", answer
    print(f"from pip install to a tool answering in a host ({'cold' if args.no_cache else 'warm'} pip cache):")
    for name, seconds in times:
        print(f"  {name:<40} {seconds:6.2f} s")
    print(f"  {'total':<40} {total:6.2f} s   (answer: {answer!r})")


if __name__ == "__main__":
    main()

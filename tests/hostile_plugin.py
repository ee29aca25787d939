"""A plugin whose tools misbehave on purpose, installed per test into a folder of its own.

``plugin_env(tmp_path)`` writes this module and a ``*.dist-info`` with its entry point into a
folder and returns the environment (PYTHONPATH) under which ``mcpkit serve --plugin hostile``
finds it the way it finds any installed plugin.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import trio

import mcpkit


@mcpkit.tool(timeout=0.5)
def stuck(seconds: float = 3600.0) -> str:
    """A plain def tool whose thread outlives its timeout (it ignores cancellation)."""
    time.sleep(seconds)
    return "woke up"


@mcpkit.tool
def quick() -> str:
    """A plain def tool that answers at once."""
    return "quick"


@mcpkit.tool
async def big(size: int) -> str:
    """An answer of ``size`` bytes."""
    return "x" * size


@mcpkit.tool
async def echo(value: Any = None) -> dict[str, Any]:
    """Echo the argument back."""
    return {"result": value}


@mcpkit.tool
async def slow(seconds: float = 1.0) -> str:
    """An async tool that takes its time, then answers."""
    await trio.sleep(seconds)
    return f"slept {seconds}"


@mcpkit.tool
async def watched(marker: str, seconds: float = 30.0) -> str:
    """Sleep; if cancelled first, say so in the file ``marker`` — a plain name, written in the
    folder $MCPKIT_TEST_MARKERS only (fuzzed arguments must not write files anywhere)."""
    folder = os.environ.get("MCPKIT_TEST_MARKERS")
    try:
        await trio.sleep(seconds)
    except trio.Cancelled:
        if folder and marker.isidentifier():
            (Path(folder) / marker).write_text("cancelled")
        raise
    return "finished"


@mcpkit.prompt
async def ask_first(ctx: mcpkit.Context) -> str:
    """A prompt that asks the client for input before answering."""
    answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
    return f"Hello {answer.get('content', {}).get('name')}"


@mcpkit.hookimpl
def mcpkit_prompts(config: dict) -> list:
    return [ask_first]


@mcpkit.hookimpl
def mcpkit_tools(config: dict) -> list:
    return [stuck, quick, big, echo, slow, watched]


def plugin_env(folder: Path) -> dict[str, str]:
    """Install this plugin into ``folder``; the environment that makes it visible."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(__file__, folder / "mcpkit_hostile_fixture.py")
    info = folder / "mcpkit_hostile_fixture-0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mcpkit-hostile-fixture\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[mcpkit.plugins]\nhostile = mcpkit_hostile_fixture\n")
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path}

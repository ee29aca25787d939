"""A plugin for the scale-out tests: tools that say which process ran them, raise change
notifications there, ask the client something, and run as a task.

Installed per test module with ``plugin_env(folder)`` (see tests/helpers.install_plugin).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import trio

import mcpkit


@mcpkit.tool
async def where() -> str:
    """The process id of the server process that ran this call."""
    return str(os.getpid())


@mcpkit.tool
async def bump(n: int, ctx: mcpkit.Context) -> str:
    """Tell subscribers that tick://<n> changed (raised in this process)."""
    await ctx.notify_resource_updated(f"tick://{n}")
    return str(os.getpid())


@mcpkit.tool
async def touch_tools(ctx: mcpkit.Context) -> str:
    """Tell every session that the tool list changed (raised in this process)."""
    await ctx.notify_list_changed("tools")
    return str(os.getpid())


@mcpkit.tool
async def confirm(question: str, ctx: mcpkit.Context) -> dict[str, Any]:
    """Ask the user a yes/no question (elicitation) and return the answer with our pid."""
    answer = await ctx.elicit(question, {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})
    return {"pid": os.getpid(), "answer": answer}


@mcpkit.tool
async def ticker(count: int, gap: float, ctx: mcpkit.Context) -> str:
    """Report progress ``count`` times, ``gap`` seconds apart."""
    for i in range(1, count + 1):
        await ctx.report_progress(i, count, f"tick {i}")
        await trio.sleep(gap)
    return f"ticked {count} times in {os.getpid()}"


@mcpkit.tool(task="required")
async def crunch(seconds: float) -> str:
    """A task: sleeps, then says which process finished it."""
    await trio.sleep(seconds)
    return f"crunched in {os.getpid()}"


@mcpkit.hookimpl
def mcpkit_tools(config: dict) -> list:
    return [where, bump, touch_tools, confirm, ticker, crunch]


def plugin_env(folder: Path) -> dict[str, str]:
    """Install this plugin into ``folder``; the environment that makes it visible."""
    from .helpers import install_plugin

    return install_plugin(folder, __file__, "mcpkit_scaleout_fixture", "scaleout")

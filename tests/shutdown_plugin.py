"""Tools for the shutdown tests, installed per test into a folder of its own (like
``hostile_plugin``): one that takes its time and one that ignores cancellation."""

from __future__ import annotations

from pathlib import Path

import trio

import mcpkit


@mcpkit.tool
async def nap(seconds: float = 60.0) -> str:
    """Sleep, then answer; cancellable like any well-behaved tool."""
    await trio.sleep(seconds)
    return f"slept {seconds}"


@mcpkit.tool
async def deaf(seconds: float = 60.0) -> str:
    """Sleep shielded from cancellation: neither a cancel nor a shutdown ends it early."""
    with trio.CancelScope(shield=True):
        await trio.sleep(seconds)
    return "finished"


@mcpkit.hookimpl
def mcpkit_tools(config: dict) -> list:
    return [nap, deaf]


def plugin_env(folder: Path) -> dict[str, str]:
    """Install this plugin into ``folder``; the environment that makes it visible."""
    from .helpers import install_plugin

    return install_plugin(folder, __file__, "mcpkit_shutdown_fixture", "shutdown")

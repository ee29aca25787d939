"""Tools for the console tests, served as a one-file plugin
(``mcpkit serve --transport http --console tests/console_plugin.py``): typed arguments of every
kind the try-it form makes an input for, a slow tool to watch in flight, one that fails, and
one that can run as a task."""

from __future__ import annotations

from typing import Literal

import trio

import mcpkit


@mcpkit.tool
def repeat(word: str, times: int, shout: bool = False) -> str:
    """Say a word a number of times, in capitals when shouting."""
    text = " ".join([word] * times)
    return text.upper() if shout else text


@mcpkit.tool
async def slow(seconds: float = 3.0) -> str:
    """Take a few seconds to answer (a call to watch in flight)."""
    await trio.sleep(seconds)
    return f"slept {seconds}"


@mcpkit.tool
def mix(color: Literal["red", "green", "blue"], ratio: float = 0.5, tags: list[str] | None = None) -> dict[str, object]:
    """An enum, a number and an array (typed as JSON in the form)."""
    return {"color": color, "ratio": ratio, "tags": tags or []}


@mcpkit.tool
def fail(reason: str = "on purpose") -> str:
    """Always fails (a tool error in the recent calls)."""
    raise ValueError(f"failed {reason}")


@mcpkit.tool(task="optional")
async def brew(seconds: float = 2.0) -> str:
    """Runs as a task for a client that declared the tasks extension (it takes a while)."""
    await trio.sleep(seconds)
    return "brewed"


@mcpkit.hookimpl
def mcpkit_tools(config: dict) -> list:
    return [repeat, slow, mix, fail, brew]

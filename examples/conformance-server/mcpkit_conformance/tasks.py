"""The fixtures of the harness's tasks-* scenarios (the io.modelcontextprotocol/tasks extension;
CONTRACT.md §5.1), written as any plugin would write a task-capable tool."""

from __future__ import annotations

from typing import Any

import trio

import mcpkit

_CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
_NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@mcpkit.tool
async def greet(name: str) -> str:
    """A plain tool: it never runs as a task."""
    return f"Hello, {name}!"


@mcpkit.tool(task="optional")
async def slow_compute(seconds: float = 1.0, label: str = "") -> str:
    """Sleep, then answer: a task when it takes a while (cancellable)."""
    await trio.sleep(seconds)
    return f"Computed {label or 'it'} after {seconds:g} s"


@mcpkit.tool(task="required")
async def failing_job() -> str:
    """A job that fails as tools fail: the task completes with an isError result."""
    await trio.sleep(1.0)
    raise mcpkit.ToolError("the job failed")


@mcpkit.tool(task="optional")
async def protocol_error_job(ctx: mcpkit.Context) -> str:
    """A job that ends in a JSON-RPC error: the task fails with it."""
    await ctx.start_task()
    await trio.sleep(0.2)
    raise mcpkit.ProtocolError(-32603, "the job crashed")


@mcpkit.tool(task="optional")
async def confirm_delete(filename: str, ctx: mcpkit.Context) -> str:
    """Ask the user to confirm, from inside a task (it waits in input_required)."""
    await ctx.start_task()
    answer = await ctx.elicit(f"Delete {filename}?", _CONFIRM)
    if answer.get("action") == "accept" and (answer.get("content") or {}).get("confirm"):
        return f"Deleted {filename}"
    return f"Kept {filename}"


@mcpkit.tool(task="optional")
async def multi_input(ctx: mcpkit.Context) -> str:
    """Two questions at once: the task waits until both are answered."""
    await ctx.start_task()
    answers: dict[str, Any] = {}

    async def ask(key: str, message: str, schema: dict[str, Any]) -> None:
        answers[key] = await ctx.elicit(message, schema, key=key)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "name", "Your name?", _NAME)
        nursery.start_soon(ask, "confirm", "Go ahead?", _CONFIRM)
    name = (answers["name"].get("content") or {}).get("name")
    return f"Thanks {name}; confirmed: {(answers['confirm'].get('content') or {}).get('confirm')}"


@mcpkit.tool(task="required")
async def test_tool_with_task(ctx: mcpkit.Context) -> str:
    """Ask for a name within the request (multi round-trip), then go on as a task."""
    answer = await ctx.elicit("What is your name?", _NAME, key="user_name")
    name = (answer.get("content") or {}).get("name", "nobody")
    await ctx.start_task()
    await trio.sleep(0.1)
    return f"Hello, {name}! This answer came from a task."


TASK_TOOLS = [greet, slow_compute, failing_job, protocol_error_job, confirm_delete, multi_input, test_tool_with_task]

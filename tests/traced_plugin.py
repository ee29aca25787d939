"""A plugin for the trace tests (served by path): a tool that starts a span of its own (it must
be a child of the request's span), a tool that fails, one that tells whether OpenTelemetry is loaded, one that elicits, and a middleware (its span
sits between the request's and the tool's)."""

from __future__ import annotations

from typing import Any

import mcpkit


@mcpkit.tool
async def work(n: int = 1) -> str:
    """Do some work inside a span of the tool's own."""
    from opentelemetry import trace

    with trace.get_tracer("traced_plugin").start_as_current_span("inner work") as span:
        span.set_attribute("work.n", n)
        return f"worked {n}"


@mcpkit.tool
def work_in_thread(n: int = 1) -> str:
    """The same from a worker thread (a plain def tool)."""
    from opentelemetry import trace

    with trace.get_tracer("traced_plugin").start_as_current_span("inner thread work"):
        return f"worked {n} in a thread"


@mcpkit.tool
async def broken() -> str:
    """Always fails (a tool error, isError)."""
    raise mcpkit.ToolError("broken on purpose")


@mcpkit.tool
def otel_modules() -> list[str]:
    """The OpenTelemetry modules this server process has imported (none, with traces off)."""
    import sys

    return sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")


@mcpkit.tool
async def ask_name(ctx: mcpkit.Context) -> str:
    """Ask the client for a name (elicitation: a server-to-client request, its own CLIENT span)."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    answer = await ctx.elicit("Your name?", schema, key="name")
    return f"Hello, {answer.get('content', {}).get('name')}!"


@mcpkit.resource("traced://notes/{name}", name="note", mime_type="text/plain")
async def note(name: str) -> str:
    return f"a note called {name}"


@mcpkit.prompt
def summarize(topic: str) -> str:
    """Ask for a summary."""
    return f"Summarize {topic}."


@mcpkit.middleware(name="audit", methods={"tools/call"})
async def audit(call: Any, call_next: Any) -> dict[str, Any]:
    return await call_next()


@mcpkit.hookimpl
def mcpkit_tools(config: dict) -> list:
    return [work, work_in_thread, broken, otel_modules, ask_name]


@mcpkit.hookimpl
def mcpkit_resources(config: dict) -> list:
    return [note]


@mcpkit.hookimpl
def mcpkit_prompts(config: dict) -> list:
    return [summarize]


@mcpkit.hookimpl
def mcpkit_middleware(config: dict) -> list:
    return [audit]

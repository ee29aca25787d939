"""An MCP server built on the official `mcp` SDK (nobody here wrote it), for the client interop tests.

    python tests/sdk_fixture_server.py stdio
    python tests/sdk_fixture_server.py http PORT [stateless]   # Streamable HTTP on /mcp
    python tests/sdk_fixture_server.py sse PORT                # legacy HTTP+SSE on /sse
"""

from __future__ import annotations

import sys
from typing import Annotated

from pydantic import BaseModel
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("sdk-fixture", version="9.9.9", instructions="An SDK server for mcpkit's client tests.")


class Weather(BaseModel):
    city: str
    temperature_c: float


@server.tool()
async def greet(name: str, excited: bool = False) -> str:
    """Say hello to someone."""
    return f"Hello, {name}{'!' if excited else '.'}"


@server.tool()
async def count(to: int, ctx: Context) -> str:
    """Count from 1 to `to`, reporting progress at every step."""
    for i in range(1, to + 1):
        await ctx.report_progress(i, to, f"counted {i}")
    return f"Counted to {to}."


@server.tool()
async def explode(message: str = "kaboom") -> str:
    """Always raise."""
    raise ToolError(message)


@server.tool()
async def weather(city: str) -> Weather:
    """Structured output."""
    return Weather(city=city, temperature_c=21.5)


class Name(BaseModel):
    name: str


def _ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool()
async def ask_name(who: Annotated[Name, Resolve(_ask_name)]) -> str:
    """Elicitation: a server request in the handshake era, an InputRequiredResult in the stateless one."""
    return f"Hello, {who.name}!"


@server.tool()
async def change_tools(ctx: Context) -> str:
    """Tell subscriptions/listen streams that the tool list changed."""
    await ctx.notify_tools_changed()
    return "changed"


if __name__ == "__main__":
    kind = sys.argv[1]
    if kind == "stdio":
        server.run("stdio")
    elif kind == "http":
        stateless = len(sys.argv) > 3 and sys.argv[3] == "stateless"
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), stateless_http=stateless)
    elif kind == "sse":
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        raise SystemExit(f"unknown transport {kind!r}")

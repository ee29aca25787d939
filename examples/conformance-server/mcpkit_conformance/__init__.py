"""The fixtures the official MCP conformance harness (``@modelcontextprotocol/conformance``) expects.

Serve them with ``mcpkit serve --transport http --plugin conformance`` and point the harness at
``http://localhost:PORT/mcp``. Names, arguments, texts and URIs follow the fixture contract in
``/work/shared/conformance/CONTRACT.md`` (§2); the order of the lists matters (the harness uses
``tools[0]`` and ``resources[0]``), so the hooks below return them in a fixed order.

Every fixture uses only the public ``mcpkit`` API. Tools that need the client work in both eras:
in the handshake era ``ctx.elicit`` / ``ctx.sample`` / ``ctx.request_input`` send requests to the
client; in the stateless era (2026-07-28) they end the round with an ``InputRequiredResult`` and
the client's retry brings the answers (multi round-trip requests, SEP-2322).
"""

from __future__ import annotations

import mcpkit

from .catalog import PROMPTS, RESOURCES, complete_prompt_arguments
from .tasks import TASK_TOOLS
from .tools import PNG_B64, TOOLS, WAV_B64


# -- hooks -------------------------------------------------------------------------------------
@mcpkit.hookimpl
def mcpkit_tools(config: dict) -> list:
    # after the others (the harness reads tools[0]); the tasks scenarios' `greet` only when asked
    # for, as it would clash with the hello example's greet wherever both are installed
    return list(TOOLS) + [t for t in TASK_TOOLS if t.name != "greet" or config.get("greet")]


@mcpkit.hookimpl
def mcpkit_resources(config: dict) -> list:
    return list(RESOURCES)


@mcpkit.hookimpl
def mcpkit_prompts(config: dict) -> list:
    return list(PROMPTS)


@mcpkit.hookimpl
def mcpkit_completions(config: dict) -> list:
    return [complete_prompt_arguments]


__all__ = ["PNG_B64", "WAV_B64", "TOOLS", "RESOURCES", "PROMPTS"]

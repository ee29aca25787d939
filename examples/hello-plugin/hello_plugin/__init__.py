"""A complete third-party mcpkit plugin, used by the docs and the tests."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
import trio

import mcpkit


@mcpkit.tool(annotations={"readOnlyHint": True}, timeout=5.0)
async def greet(name: str, excited: bool = False) -> str:
    """Say hello to someone."""
    return f"Hello, {name}{'!' if excited else '.'}"


@mcpkit.tool(title="Count with progress")
async def count(
    to: Annotated[int, msgspec.Meta(ge=1, le=1000, description="How far to count")] = 5,
    delay: Annotated[float, msgspec.Meta(ge=0, le=10, description="Seconds between steps")] = 0.01,
    ctx: mcpkit.Context | None = None,
) -> str:
    """Count from 1 to `to`, reporting progress at every step."""
    assert ctx is not None
    for i in range(1, to + 1):
        await ctx.report_progress(i, to, f"counted {i}")
        await trio.sleep(delay)
    await ctx.log("info", f"counted to {to}")
    return f"Counted to {to}."


class Forecast(msgspec.Struct):
    city: str
    temperature_c: float
    conditions: Literal["sunny", "cloudy", "rainy"]


_CONDITIONS: tuple[Literal["sunny", "cloudy", "rainy"], ...] = ("sunny", "cloudy", "rainy")


@mcpkit.tool(annotations={"readOnlyHint": True, "idempotentHint": True})
async def forecast(city: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]) -> Forecast:
    """A (made-up, deterministic) weather forecast for a city, as structured data."""
    seed = sum(city.encode())
    return Forecast(city=city, temperature_c=round(5 + seed % 25 + (seed % 10) / 10, 1), conditions=_CONDITIONS[seed % 3])


@mcpkit.tool
def word_count(text: str) -> int:
    """Count the words in a text (a plain function: runs in a worker thread)."""
    return len(text.split())


@mcpkit.tool
async def fail(message: str = "something went wrong") -> str:
    """Always raise; shows how errors reach the client."""
    raise mcpkit.ToolError(message)


@mcpkit.tool(timeout=0.2)
async def sleepy(seconds: float = 1.0) -> str:
    """Sleep for a while (times out after 0.2 s; for trying out timeouts and cancellation)."""
    await trio.sleep(seconds)
    return f"slept {seconds} s"


@mcpkit.tool
async def ask_name(ctx: mcpkit.Context) -> str:
    """Ask the user for their name (elicitation), then greet them.

    Works in every era: a server request in the handshake era, an input-required round trip
    in the stateless one.
    """
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    answer = await ctx.elicit("What is your name?", schema, key="name")
    if answer.get("action") != "accept":
        return "No name given."
    return f"Hello, {answer['content']['name']}!"


@mcpkit.resource("hello://greeting", name="greeting", mime_type="text/plain", description="A friendly greeting")
def greeting() -> str:
    return "Hello from the hello plugin!"


@mcpkit.resource("hello://people/{name}", name="person", mime_type="text/plain", description="A line about a person")
async def person(name: str) -> str:
    return f"{name} is a friend of the hello plugin."


@mcpkit.prompt(title="Introduce someone")
def introduce(name: Annotated[str, msgspec.Meta(description="Who to introduce")], style: str = "formal") -> str:
    """Ask the model to introduce a person."""
    return f"Please introduce {name} in a {style} style."


@mcpkit.completion(prompt="introduce", argument="style")
def complete_style(argument: str, value: str, context: dict[str, str]) -> list[str]:
    return [s for s in ("formal", "friendly", "funny", "poetic") if s.startswith(value)]


@mcpkit.hookimpl
def mcpkit_tools(config: dict) -> list:
    return [greet, count, forecast, word_count, fail, sleepy, ask_name]


@mcpkit.hookimpl
def mcpkit_resources(config: dict) -> list:
    return [greeting, person]


@mcpkit.hookimpl
def mcpkit_prompts(config: dict) -> list:
    return [introduce]


@mcpkit.hookimpl
def mcpkit_completions(config: dict) -> list:
    return [complete_style]

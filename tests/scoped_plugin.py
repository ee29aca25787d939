"""A plugin for the authorization tests: tools, resources and a prompt with OAuth scopes, a
tool that tells who is asking, and a token verifier of its own (the provider-plugin hook).

Installed per test module with ``plugin_env(folder)`` (see tests/helpers.install_plugin).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcpkit


@mcpkit.tool
async def whoami(ctx: mcpkit.Context) -> dict[str, Any]:
    """Who the server thinks is asking."""
    p = ctx.principal
    if p is None:
        return {"subject": None}
    return {"subject": p.subject, "client_id": p.client_id, "scopes": sorted(p.scopes), "issuer": p.issuer,
            "audience": p.claims.get("aud")}


@mcpkit.tool(scopes=["tools:read"])
async def read_notes() -> str:
    """Read the notes (needs tools:read)."""
    return "note 1; note 2"


@mcpkit.tool(scopes=["tools:write"])
async def write_note(text: str) -> str:
    """Write a note (needs tools:write)."""
    return f"saved: {text}"


@mcpkit.tool(scopes=["admin"])
async def reset() -> str:
    """Wipe everything (needs admin)."""
    return "reset"


@mcpkit.tool(task="required")
async def long_job(seconds: float = 30.0) -> str:
    """Runs as a task (the tasks extension): its owner is who started it."""
    import trio

    await trio.sleep(seconds)
    return "done"


@mcpkit.resource("notes://public")
async def public_notes() -> str:
    return "public"


@mcpkit.resource("notes://secret", scopes=["admin"])
async def secret_notes() -> str:
    return "secret"


@mcpkit.prompt(scopes=["tools:read"])
async def summarize(topic: str) -> str:
    """Summarize the notes on a topic (needs tools:read)."""
    return f"Summarize the notes about {topic}."


class PrefixVerifier:
    """Accepts ``letmein.<subject>.<scope>+<scope>`` (``~`` standing for ``:``, which a bearer
    token cannot carry): a provider plugin's verifier."""

    def __init__(self, auth: Any) -> None:
        self.auth = auth

    async def verify(self, token: str, resource: str) -> Any:
        from mcpkit import InvalidToken, Principal

        parts = token.split(".")
        if len(parts) != 3 or parts[0] != "letmein":
            raise InvalidToken("not a letmein token")
        return Principal(subject=parts[1], scopes=self.auth.expand(s.replace("~", ":") for s in parts[2].split("+") if s))

    async def aclose(self) -> None:
        return None


@mcpkit.hookimpl
def mcpkit_tools(config: dict) -> list:
    return [whoami, read_notes, write_note, reset, long_job]


@mcpkit.hookimpl
def mcpkit_resources(config: dict) -> list:
    return [public_notes, secret_notes]


@mcpkit.hookimpl
def mcpkit_prompts(config: dict) -> list:
    return [summarize]


@mcpkit.hookimpl
def mcpkit_token_verifiers(config: dict) -> dict:
    return {"letmein": PrefixVerifier}


def plugin_env(folder: Path) -> dict[str, str]:
    """Install this plugin into ``folder``; the environment that makes it visible."""
    from .helpers import install_plugin

    return install_plugin(folder, __file__, "mcpkit_scoped_fixture", "scoped")

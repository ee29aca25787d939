"""The hooks a plugin may implement. Every one is optional.

Each hook receives only the arguments it names: ``config`` is the plugin's own table
(``[plugins.NAME]`` of the config file, merged with ``MCPKIT_PLUGIN__NAME__KEY`` variables) and
``plugin`` the name of the plugin the call is for.

mcpkit calls each hook once per plugin (each gets its own table, and what it returns is served
under its name), through pluggy, so pluggy's options work as pluggy documents them: a wrapper
(``@mcpkit.hookimpl(wrapper=True)``, or the older ``hookwrapper=True``) is called around every
plugin's implementation of its hook and may change what it returns — ``plugin`` says whose it
is; ``tryfirst`` / ``trylast`` order the plugins: their tools, resources and prompts are listed,
their middleware of equal ``order`` nest, and their lifespans are entered in that order.
"""

from __future__ import annotations

from typing import Any

import pluggy

PROJECT = "mcpkit"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def mcpkit_tools(config: dict[str, Any], plugin: str) -> list[Any]:
    """Return the tools (``@mcpkit.tool`` objects) this plugin serves."""


@hookspec
def mcpkit_resources(config: dict[str, Any], plugin: str) -> list[Any]:
    """Return resources and resource templates (``@mcpkit.resource`` objects)."""


@hookspec
def mcpkit_prompts(config: dict[str, Any], plugin: str) -> list[Any]:
    """Return prompts (``@mcpkit.prompt`` objects)."""


@hookspec
def mcpkit_completions(config: dict[str, Any], plugin: str) -> list[Any]:
    """Return argument completions (``@mcpkit.completion`` objects)."""


@hookspec
def mcpkit_middleware(config: dict[str, Any], plugin: str) -> list[Any]:
    """Return middleware (``@mcpkit.middleware`` objects, or ``async def mw(call, call_next)``
    functions) wrapping the requests the server answers."""


@hookspec
def mcpkit_lifespan(config: dict[str, Any], plugin: str) -> Any:
    """Return an async context manager held open while the server runs (or None).

    Open what the plugin holds (a database, a client) on entry; close it on exit.
    """


@hookspec
def mcpkit_token_verifiers(config: dict[str, Any], plugin: str) -> dict[str, Any]:
    """Return token verifier factories by name: ``{"name": factory}``.

    ``factory(auth)`` gets the ``[server.auth]`` settings (:class:`mcpkit.AuthSettings`) and
    returns a :class:`mcpkit.TokenVerifier`; ``[server.auth] verifier = "name"`` selects it.
    mcpkit's own ``jwt``, ``introspection`` and ``static`` verifiers come the same way.
    """


@hookspec
def mcpkit_cli_commands(plugin: str) -> list[Any]:
    """Return click commands to add to the ``mcpkit`` command line."""

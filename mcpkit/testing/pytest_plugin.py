"""pytest fixtures for plugin authors (registered through the ``pytest11`` entry point).

    # conftest.py
    import pytest
    import acme_tools

    @pytest.fixture
    def mcpkit_plugins():
        return [acme_tools]               # or {"acme": acme_tools}

    # test_acme.py  (async tests need pytest-trio: trio_mode = true, or @pytest.mark.trio)
    async def test_greet(mcpkit_client):
        assert (await mcpkit_client.call_tool("greet", {"name": "Ada"})).text == "Hello, Ada."

``mcpkit_config`` (the config file's shape) and ``mcpkit_client_options`` (client settings such as
``{"mode": "handshake"}``) may be overridden the same way.
"""

from __future__ import annotations

from typing import Any, AsyncIterator

import pytest


@pytest.fixture
def mcpkit_plugins() -> Any:
    """The plugin objects to serve: override this fixture in your conftest.py or test module."""
    raise pytest.UsageError("the mcpkit_client fixture needs a mcpkit_plugins fixture returning your plugin "
                            "module(s), e.g. `@pytest.fixture\\ndef mcpkit_plugins(): return [my_plugin]`")


@pytest.fixture
def mcpkit_config() -> dict[str, Any]:
    """Config in the config file's shape: ``{"server": {...}, "plugins": {"NAME": {...}}}``."""
    return {}


@pytest.fixture
def mcpkit_client_options() -> dict[str, Any]:
    return {}


@pytest.fixture
async def mcpkit_client(mcpkit_plugins: Any, mcpkit_config: dict[str, Any],
                        mcpkit_client_options: dict[str, Any]) -> AsyncIterator[Any]:
    """A :class:`mcpkit.client.Client` connected to an in-memory server of ``mcpkit_plugins``."""
    from . import connect

    async with connect(mcpkit_plugins, config=mcpkit_config, **mcpkit_client_options) as client:
        yield client

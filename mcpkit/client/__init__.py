"""mcpkit.client: a trio-native MCP client for every era and transport.

    import mcpkit.client as mc

    async with mc.connect(["mcpkit", "serve"]) as client:          # a stdio subprocess
        print(await client.list_tools())
    async with mc.connect("http://127.0.0.1:8000/mcp") as client:  # Streamable HTTP / legacy SSE
        result = await client.call_tool("greet", {"name": "Ada"})
"""

from .client import Client, connect, forget_eras, is_url
from .errors import *  # noqa: F403
from .errors import __all__ as _errors
from .results import CallResult, ServerDescription
from .session import Handlers, Notification
from .settings import ClientSettings

__all__ = ["Client", "connect", "forget_eras", "is_url", "CallResult", "ServerDescription",
           "Handlers", "Notification", "ClientSettings", *_errors]

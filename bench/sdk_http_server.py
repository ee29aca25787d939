"""The official SDK's MCPServer over Streamable HTTP with the hello plugin's greet tool.

python bench/sdk_http_server.py PORT [stateless-json|default]
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-bench")


@server.tool()
async def greet(name: str, excited: bool = False) -> str:
    """Say hello to someone."""
    return f"Hello, {name}{'!' if excited else '.'}"


if __name__ == "__main__":
    port, mode = int(sys.argv[1]), sys.argv[2]
    stateless = mode == "stateless-json"
    server.run("streamable-http", host="127.0.0.1", port=port, json_response=stateless, stateless_http=stateless)

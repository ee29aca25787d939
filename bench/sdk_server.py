"""The official SDK's MCPServer with the same greet tool as the hello plugin (benchmark peer)."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-bench")


@server.tool()
async def greet(name: str, excited: bool = False) -> str:
    """Say hello to someone."""
    return f"Hello, {name}{'!' if excited else '.'}"


if __name__ == "__main__":
    server.run("stdio")

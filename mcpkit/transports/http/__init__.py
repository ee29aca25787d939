"""HTTP transports: Streamable HTTP (both eras) on /mcp and legacy HTTP+SSE on /sse + /messages."""

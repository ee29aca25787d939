"""Sans-IO MCP protocol core: wire types, JSON-RPC framing, revisions and eras.

Nothing here does I/O or imports trio; transports feed bytes in and get bytes out.
"""

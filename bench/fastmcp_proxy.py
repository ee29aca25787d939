"""FastMCP's proxy (``create_proxy``) in front of an upstream, over Streamable HTTP (stateless,
JSON answers): the peer of mcpkit's gateway in bench/bench_gateway.py. Runs in its own venv
(.bench/fastmcp-venv: FastMCP is a benchmark-only dependency).

    python bench/fastmcp_proxy.py PORT stdio COMMAND...
    python bench/fastmcp_proxy.py PORT http URL
"""

import os
import sys

from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from fastmcp.server import create_proxy

port, kind, rest = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
if kind == "stdio":
    upstream = StdioTransport(command=rest[0], args=rest[1:], env=dict(os.environ))
else:
    upstream = StreamableHttpTransport(rest[0])
proxy = create_proxy(upstream, name="fastmcp-proxy")
proxy.run(transport="http", host="127.0.0.1", port=port, stateless_http=True, json_response=True, show_banner=False)

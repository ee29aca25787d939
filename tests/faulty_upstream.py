"""A deliberately bad stdio MCP server (handshake era), for the gateway's failure tests.

    python tests/faulty_upstream.py MODE

MODE: ``ok`` (well behaved), ``exit`` (exits with code 3 before reading anything), ``garbage``
(answers everything with a line that is not JSON), ``hang`` (answers the handshake and lists,
never a tools/call), ``oversize`` (answers tools/call with a 2 MiB line), ``flood`` (sends 50,000
log messages before answering tools/call). Tools: ``pid`` (the process id), ``sleep``
(``seconds``), ``echo`` (``text``), ``rich`` (a result with structuredContent, isError, _meta
and content the older revisions cannot carry, written with unusual spacing and escapes),
``refuse`` (a JSON-RPC error with data), ``badmeta`` (a result whose ``_meta`` is a list).
"""

from __future__ import annotations

import json
import os
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
TOOLS = [
    {"name": "pid", "description": "This process's id.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "sleep", "description": "Sleep, then answer.", "inputSchema": {
        "type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}},
    {"name": "echo", "description": "Echo the text.", "annotations": {"readOnlyHint": True},
     "_meta": {"example.com/owner": "tests"},
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "rich", "description": "A result with everything.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "refuse", "description": "Answers an error.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "badmeta", "description": "A result whose _meta is not an object.", "inputSchema": {"type": "object", "properties": {}}},
]
#: the rich tool's result line, as written (spacing and escapes kept on purpose)
RICH = ('{"jsonrpc": "2.0", "id": %s, "result": {"content": [{"type": "text", "text": "caf\\u00e9 \\"q\\""},'
        ' {"type": "resource_link", "uri": "file:///r.txt", "name": "r"}], "structuredContent": {"n": 1.5, "l": [true, null]},'
        ' "isError": true, "_meta": {"example.com/trace": "abc", "io.modelcontextprotocol/serverInfo": {"name": "x"}},'
        ' "example.com/extra": {"kept": 1}}}')


def send(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def answer(rid: object, result: dict) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def main() -> None:
    if MODE == "exit":
        sys.exit(3)
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if rid is None:
            continue  # notifications (initialized, cancelled)
        if MODE == "garbage":
            sys.stdout.write("this is not JSON at all\n")
            sys.stdout.flush()
            continue
        if method == "initialize":
            answer(rid, {"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": True}, "logging": {}},
                         "serverInfo": {"name": "faulty", "version": "1.0"}})
        elif method == "tools/list":
            answer(rid, {"tools": TOOLS})
        elif method == "ping":
            if MODE != "hang":
                answer(rid, {})
        elif method == "tools/call":
            name, args = params.get("name"), params.get("arguments") or {}
            if MODE == "hang":
                continue
            if MODE == "oversize":
                sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {
                    "content": [{"type": "text", "text": "x" * (2 * 1024 * 1024)}]}}) + "\n")
                sys.stdout.flush()
                continue
            if MODE == "flood":
                for i in range(50_000):
                    send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": f"flood {i}"}})
            if name == "rich":
                sys.stdout.write(RICH % json.dumps(rid) + "\n")
                sys.stdout.flush()
                continue
            if name == "badmeta":
                answer(rid, {"content": [{"type": "text", "text": "odd"}], "_meta": ["not", "an", "object"]})
                continue
            if name == "refuse":
                send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no, thanks", "data": {"why": "test"}}})
                continue
            if name == "pid":
                text = str(os.getpid())
            elif name == "sleep":
                time.sleep(float(args.get("seconds", 1)))
                text = "slept"
            else:
                text = str(args.get("text", ""))
            answer(rid, {"content": [{"type": "text", "text": text}], "isError": False})
        elif method == "logging/setLevel":
            answer(rid, {})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"Method not found: {method}"}})


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A scripted MCP peer for the client tests: standard library only, it never imports mcpkit.

It speaks newline-delimited JSON-RPC on stdin/stdout (or, with ``--http PORT``, one POST per
message on ``/mcp``, handshake era only), behaves as its command line says, and appends one JSON
line per message to the file named by the ``SCRIPTED_PEER_LOG`` environment variable::

    {"pid": ..., "t": <time.monotonic()>, "dir": "in",  "msg": {...}, "sent_before": ["result:1", ...]}
    {"pid": ..., "t": ..., "dir": "out", "msg": {...}}

``sent_before`` summarises everything this peer had written before the message arrived
(``result:ID``, ``error:ID``, ``METHOD`` for a notification, ``METHOD#ID`` for a request), so a
test can tell whether the client waited for an answer. ``time.monotonic()`` is the system-wide
CLOCK_MONOTONIC on Linux, comparable with the test process's clock.

Options:
  --era legacy|modern      legacy: the initialize handshake; modern: answers server/discover and
                           refuses initialize (default legacy).
  --discover HOW           answer | silent | error:CODE | unsupported:V1,V2 (-32022 with
                           data.supported); default: error:-32601 (legacy), answer (modern).
  --init-delay SECONDS     wait before answering initialize.
  --init-version VERSION   answer initialize with this protocolVersion whatever was asked.
  --ttl-ms N               put ttlMs in tools/list results.
  --changed-after-list     right after the first tools/list answer (in the same write), the tool
                           list changes and notifications/tools/list_changed is sent.
  --no-logging             do not declare the logging capability.

Tools: echo, add (answers after a delay depending on ``a``, so concurrent answers reorder), slow,
fail (a JSON-RPC error with the given code/message/data), tool_error (an isError result), strict
(a demanding input schema), exit (the peer dies mid-call; over HTTP the connection is dropped),
ask (asks the client ping, roots/list, sampling/createMessage and elicitation/create), ask_cancel
(asks elicitation/create, then cancels it), progress, changed (the tool list changes).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

HANDSHAKE_VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
MODERN = "2026-07-28"
SERVER_INFO = {"name": "scripted", "version": "1.0"}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--era", choices=["legacy", "modern"], default="legacy")
    p.add_argument("--discover", default=None)
    p.add_argument("--init-delay", type=float, default=0.0)
    p.add_argument("--init-version", default=None)
    p.add_argument("--ttl-ms", type=int, default=None)
    p.add_argument("--changed-after-list", action="store_true")
    p.add_argument("--no-logging", action="store_true")
    p.add_argument("--http", type=int, default=None, metavar="PORT")
    args = p.parse_args(argv)
    if args.discover is None:
        args.discover = "answer" if args.era == "modern" else "error:-32601"
    return args


def tool_list(generation: int) -> list[dict[str, Any]]:
    def tool(name: str, props: dict[str, Any] | None = None, required: list[str] | None = None,
             **extra: Any) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object", "properties": props or {}}
        if required:
            schema["required"] = required
        schema.update(extra)
        return {"name": name, "description": f"the {name} tool", "inputSchema": schema}

    tools = [
        tool("echo", {"text": {"type": "string"}}, ["text"]),
        tool("add", {"a": {"type": "integer"}, "b": {"type": "integer"}}, ["a", "b"]),
        tool("slow", {"seconds": {"type": "number"}, "ignore_cancel": {"type": "boolean"}}, ["seconds"]),
        tool("fail", {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}}, ["code"]),
        tool("tool_error"),
        tool("strict", {
            "name": {"type": "string"},
            "mode": {"type": "string", "enum": ["fast", "careful"]},
            "count": {"type": "integer", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}},
            "opts": {"type": "object", "properties": {"depth": {"type": "integer"}, "flag": {"type": "boolean"}},
                     "required": ["depth"]},
        }, ["name"], additionalProperties=False),
        tool("exit"),
        tool("ask"),
        tool("ask_cancel"),
        tool("progress"),
        tool("changed"),
    ]
    if generation > 0:
        tools.append(tool("added"))
    return tools


class Peer:
    def __init__(self, args: argparse.Namespace, write: Callable[[bytes], None] | None) -> None:
        self.args = args
        self._write = write
        self.io_lock = threading.Lock()
        self.sent: list[str] = []
        path = os.environ.get("SCRIPTED_PEER_LOG")
        self.log_file = open(path, "a", buffering=1) if path else None
        self.generation = 0
        self.lists_answered = 0
        self.cancelled: dict[Any, threading.Event] = {}
        self.waiting: dict[Any, tuple[threading.Event, list[Any]]] = {}
        self.ids = itertools.count(1)
        self.state_lock = threading.Lock()

    # --- logging and writing ------------------------------------------------------------------

    def _log(self, entry: dict[str, Any]) -> None:
        if self.log_file is not None:
            entry = {"pid": os.getpid(), **entry}
            self.log_file.write(json.dumps(entry) + "\n")
            self.log_file.flush()

    def received(self, msg: Any) -> None:
        with self.io_lock:  # a write in progress finishes (and is summarised) first
            self._log({"t": time.monotonic(), "dir": "in", "msg": msg, "sent_before": list(self.sent)})

    def send(self, *msgs: dict[str, Any]) -> None:
        """Write messages in one write() call, so they reach the client together."""
        if self._write is None:
            raise RuntimeError("this transport cannot send server-initiated messages")
        data = b"".join(json.dumps(m).encode() + b"\n" for m in msgs)
        with self.io_lock:  # logged first: the process may exit as soon as the client has the answer
            t = time.monotonic()
            for m in msgs:
                self.sent.append(summary(m))
                self._log({"t": t, "dir": "out", "msg": m})
            self._write(data)

    def note_sent(self, msg: dict[str, Any]) -> None:
        """Record an answer written by another path (HTTP responses)."""
        with self.io_lock:
            self.sent.append(summary(msg))
            self._log({"t": time.monotonic(), "dir": "out", "msg": msg})

    # --- dispatch -------------------------------------------------------------------------------

    def on_message(self, msg: Any) -> None:
        """stdio: log, then route answers and notifications here and requests to a thread."""
        self.received(msg)
        if not isinstance(msg, dict):
            return
        if "method" not in msg:
            waiter = self.waiting.get(msg.get("id"))
            if waiter is not None:
                waiter[1].append(msg)
                waiter[0].set()
            return
        if "id" not in msg:
            self.on_notification(msg)
            return
        threading.Thread(target=self._answer_in_thread, args=(msg,), daemon=True).start()

    def _answer_in_thread(self, msg: dict[str, Any]) -> None:
        reply = self.handle(msg)
        if reply is not None:
            extra = []
            if msg.get("method") == "tools/list" and self.args.changed_after_list:
                with self.state_lock:
                    self.lists_answered += 1
                    first = self.lists_answered == 1
                    if first:
                        self.generation += 1
                if first:
                    extra.append({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            self.send(reply, *extra)

    def on_notification(self, msg: dict[str, Any]) -> None:
        if msg["method"] == "notifications/cancelled":
            rid = (msg.get("params") or {}).get("requestId")
            with self.state_lock:
                event = self.cancelled.setdefault(rid, threading.Event())
            event.set()

    def handle(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """The answer to one request, or None for no answer at all."""
        rid, method = msg["id"], msg["method"]
        params = msg.get("params") or {}
        with self.state_lock:
            self.cancelled.setdefault(rid, threading.Event())
        try:
            result = self.dispatch(rid, method, params)
        except RpcFailure as exc:
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            return {"jsonrpc": "2.0", "id": rid, "error": error}
        if result is None:
            return None
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    def dispatch(self, rid: Any, method: str, params: dict[str, Any]) -> Any:
        era = self.args.era
        if method == "ping":
            return {}
        if method == "server/discover":
            how = self.args.discover
            if how == "silent":
                return None
            if how.startswith("error:"):
                raise RpcFailure(int(how.split(":", 1)[1]), f"{method} is not something this peer knows")
            if how.startswith("unsupported:"):
                requested = ((params.get("_meta") or {}).get("io.modelcontextprotocol/protocolVersion"))
                raise RpcFailure(-32022, "unsupported protocol version",
                                 {"supported": how.split(":", 1)[1].split(","), "requested": requested})
            return {"resultType": "complete", "supportedVersions": [MODERN], "capabilities": self.capabilities(),
                    "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}
        if method == "initialize":
            if era == "modern":
                raise RpcFailure(-32601, "initialize is gone; use server/discover", {"supported": [MODERN]})
            time.sleep(self.args.init_delay)
            asked = params.get("protocolVersion")
            version = self.args.init_version or (asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1])
            return {"protocolVersion": version, "capabilities": self.capabilities(), "serverInfo": SERVER_INFO}
        if method == "logging/setLevel":
            return {}
        if method == "tools/list":
            with self.state_lock:
                tools = tool_list(self.generation)
            result: dict[str, Any] = {"tools": tools}
            if self.args.ttl_ms is not None:
                result["ttlMs"] = self.args.ttl_ms
            return result
        if method == "tools/call":
            return self.call(rid, str(params.get("name")), params.get("arguments") or {}, params.get("_meta") or {})
        raise RpcFailure(-32601, f"method not found: {method}")

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {"tools": {"listChanged": True}}
        if not self.args.no_logging:
            caps["logging"] = {}
        return caps

    # --- tools ------------------------------------------------------------------------------------

    def call(self, rid: Any, name: str, args: dict[str, Any], meta: dict[str, Any]) -> Any:
        def text(value: str, **extra: Any) -> dict[str, Any]:
            return {"content": [{"type": "text", "text": value}], **extra}

        if name == "echo":
            return text(str(args.get("text")))
        if name == "add":
            a, b = int(args["a"]), int(args["b"])
            time.sleep((a * 7 % 10) * 0.02)
            return text(str(a + b), structuredContent={"sum": a + b})
        if name == "slow":
            if args.get("ignore_cancel"):
                time.sleep(float(args["seconds"]))  # answers even when cancelled: a late answer
                return text("slept anyway")
            if self.cancelled[rid].wait(float(args["seconds"])):
                return None  # a cancelled request gets no answer
            return text("slept")
        if name == "fail":
            raise RpcFailure(int(args["code"]), str(args.get("message", "failed")), args.get("data"))
        if name == "tool_error":
            return text("it broke", isError=True)
        if name == "strict":
            return text("ok")
        if name == "exit":
            if self._write is None:
                raise DropConnection()
            os._exit(3)
        if name == "ask":
            answers = {}
            for method, params in (("ping", {}),
                                   ("roots/list", {}),
                                   ("sampling/createMessage", {"messages": [{"role": "user", "content": {
                                       "type": "text", "text": "hello?"}}], "maxTokens": 5}),
                                   ("elicitation/create", {"message": "Your name?", "requestedSchema": {
                                       "type": "object", "properties": {"name": {"type": "string"}}}})):
                answers[method] = self.ask(method, params)
            return text("asked", structuredContent=answers)
        if name == "ask_cancel":
            sid = f"srv-{next(self.ids)}"
            event = threading.Event()
            self.waiting[sid] = (event, got := [])
            self.send({"jsonrpc": "2.0", "id": sid, "method": "elicitation/create",
                       "params": {"message": "never mind", "requestedSchema": {"type": "object", "properties": {}}}})
            time.sleep(0.2)
            self.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": sid, "reason": "changed my mind"}})
            answered = event.wait(0.3)
            return text("cancelled", structuredContent={"answered": answered, "answer": got[0] if got else None})
        if name == "progress":
            token = meta.get("progressToken")
            for step in (1, 2, 3):
                if token is not None:
                    self.send({"jsonrpc": "2.0", "method": "notifications/progress",
                               "params": {"progressToken": token, "progress": step, "total": 3,
                                          "message": f"step {step}"}})
            self.send({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": "not-a-token-of-yours", "progress": 99}})
            self.send({"jsonrpc": "2.0", "method": "notifications/message",
                       "params": {"level": "warning", "logger": "scripted", "data": "half way"}})
            return text("done")
        if name == "changed":
            with self.state_lock:
                self.generation += 1
            self.send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            return text("changed")
        raise RpcFailure(-32602, f"unknown tool {name}")

    def ask(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request to the client and wait for its answer (stdio only)."""
        sid = f"srv-{next(self.ids)}"
        event = threading.Event()
        self.waiting[sid] = (event, got := [])
        self.send({"jsonrpc": "2.0", "id": sid, "method": method, "params": params})
        if not event.wait(5):
            return {"timeout": True}
        answer = got[0]
        return {"result": answer["result"]} if "result" in answer else {"error": answer.get("error")}


class RpcFailure(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class DropConnection(Exception):
    """Close the HTTP connection without answering."""


def summary(msg: dict[str, Any]) -> str:
    if "method" in msg:
        return f"{msg['method']}#{msg['id']}" if "id" in msg else msg["method"]
    return f"{'error' if 'error' in msg else 'result'}:{msg.get('id')}"


def serve_stdio(args: argparse.Namespace) -> None:
    out = sys.stdout.buffer

    def write(data: bytes) -> None:
        out.write(data)
        out.flush()

    peer = Peer(args, write)
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            peer.received({"unparsable": line.decode("utf-8", "replace")})
            continue
        peer.on_message(msg)
    with peer.io_lock:  # never exit half way through a write
        peer._log({"t": time.monotonic(), "dir": "eof"})
        os._exit(0)


def serve_http(args: argparse.Namespace) -> None:
    peer = Peer(args, None)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:  # keep stderr quiet
            pass

        def _reply(self, status: int, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            if body is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = True

        def do_POST(self) -> None:
            msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            peer.received(msg)
            if "method" not in msg or "id" not in msg:
                if "method" in msg:
                    peer.on_notification(msg)
                self._reply(202)
                return
            try:
                reply = peer.handle(msg)
            except DropConnection:
                self.close_connection = True
                peer._log({"t": time.monotonic(), "dir": "dropped", "id": msg["id"]})
                return  # no status line at all: the client sees the connection end
            if reply is None:
                self._reply(202)
                return
            peer.note_sent(reply)
            headers = {"Mcp-Session-Id": "scripted-session"} if msg["method"] == "initialize" else None
            self._reply(200, reply, headers)

        def do_GET(self) -> None:
            self._reply(405)

        def do_DELETE(self) -> None:
            self._reply(200)

    server = ThreadingHTTPServer(("127.0.0.1", args.http), Handler)
    server.daemon_threads = True
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


def main() -> None:
    args = parse_args(sys.argv[1:])
    if args.http is not None:
        serve_http(args)
    else:
        serve_stdio(args)


if __name__ == "__main__":
    main()

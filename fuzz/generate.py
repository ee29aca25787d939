"""Hostile and careless MCP traffic: valid messages for every method and era, and mutations of
them at the JSON and the byte level. Seeded, so a campaign can be replayed."""

from __future__ import annotations

import json
import random
from typing import Any, Callable

STATELESS = "2026-07-28"
HANDSHAKE = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
JUNK_VALUES: list[Any] = [
    None, True, False, 0, -1, 2**63, -(2**64), 1e308, -1e-308, 0.5, "", " ", "\u0000", "\ud7ff\ue000",
    "💥" * 50, "a" * 5000, [], {}, [None], {"": None}, {"__proto__": {}}, "../../etc/passwd", "/proc/kmsg",
    "%s%n%x", "' OR 1=1 --", "\r\n\t", "=?base64?AAAA?=",
]
WEIRD_IDS: list[Any] = [None, True, 1.5, -0.0, [], {}, "", "x" * 300, 2**70, -(2**63)]


def meta(version: str = STATELESS, **extra: Any) -> dict[str, Any]:
    out = {"io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": {},
           "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "0"}}
    out.update(extra)
    return out


class Corpus:
    """Valid requests built from what the server says it offers."""

    def __init__(self, rng: random.Random, tools: list[dict[str, Any]], resources: list[str], prompts: list[str]) -> None:
        self.rng = rng
        self.tools = tools or [{"name": "missing", "inputSchema": {"type": "object"}}]
        self.resources = resources or ["file:///nothing"]
        self.prompts = prompts or ["missing"]
        self._next = 0

    def next_id(self) -> int | str:
        self._next += 1
        return self._next if self._next % 3 else f"f{self._next}"

    def value_for(self, schema: Any, depth: int = 0) -> Any:
        """A plausible value for a JSON Schema, sometimes a wrong one."""
        rng = self.rng
        if not isinstance(schema, dict) or rng.random() < 0.08 or depth > 4:
            return rng.choice(JUNK_VALUES)
        if "enum" in schema and schema["enum"]:
            return rng.choice(schema["enum"])
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = rng.choice(kind) if kind else None
        if kind == "object" or "properties" in schema:
            props = schema.get("properties", {})
            return {k: self.value_for(v, depth + 1) for k, v in props.items() if rng.random() < 0.8}
        if kind == "array":
            return [self.value_for(schema.get("items", {}), depth + 1) for _ in range(rng.randint(0, 3))]
        if kind == "integer":
            lo, hi = schema.get("minimum", 0), schema.get("maximum", 100)
            return rng.randint(int(lo), int(max(lo, min(hi, lo + 1000))))
        if kind == "number":
            return rng.uniform(float(schema.get("minimum", 0)), float(min(schema.get("maximum", 5), 5)))
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "string":
            return rng.choice(["hello", "fuzz", "a.py", "issue", "x" * rng.randint(1, 40), "/tmp", "close an issue"])
        return rng.choice(JUNK_VALUES)

    def request(self, stateless: bool, version: str) -> dict[str, Any]:
        rng = self.rng
        tool = rng.choice(self.tools)
        choices: list[tuple[str, Callable[[], Any]]] = [
            ("tools/list", lambda: {}),
            ("tools/call", lambda: {"name": tool["name"], "arguments": self.value_for(tool.get("inputSchema", {}))}),
            ("tools/call", lambda: {"name": tool["name"], "arguments": self.value_for(tool.get("inputSchema", {}))}),
            ("resources/list", lambda: {"cursor": rng.choice([None, "MA==", "junk", "OTk5OQ=="])}),
            ("resources/templates/list", lambda: {}),
            ("resources/read", lambda: {"uri": rng.choice(self.resources + ["code://x/../../etc/passwd", "nope://"])}),
            ("prompts/list", lambda: {}),
            ("prompts/get", lambda: {"name": rng.choice(self.prompts), "arguments": {"name": "x", "style": "y"}}),
            ("completion/complete", lambda: {"ref": {"type": "ref/prompt", "name": rng.choice(self.prompts)}, "argument": {"name": "style", "value": "f"}}),
        ]
        if stateless:
            choices.append(("server/discover", lambda: {}))
        else:
            choices += [
                ("ping", lambda: {}),
                ("logging/setLevel", lambda: {"level": rng.choice(["debug", "info", "bogus"])}),
                ("resources/subscribe", lambda: {"uri": rng.choice(self.resources)}),
                ("resources/unsubscribe", lambda: {"uri": rng.choice(self.resources)}),
            ]
        method, build = rng.choice(choices)
        params = build()
        if stateless:
            params["_meta"] = meta(version, progressToken=rng.choice([None, 1, "p"])) if rng.random() < 0.95 else rng.choice(JUNK_VALUES)
        elif rng.random() < 0.3:
            params["_meta"] = {"progressToken": self.next_id()}
        return {"jsonrpc": "2.0", "id": self.next_id(), "method": method, "params": params}

    def notification(self) -> dict[str, Any]:
        rng = self.rng
        method, params = rng.choice([
            ("notifications/initialized", None),
            ("notifications/cancelled", {"requestId": rng.choice([1, "f3", None, [], 99999])}),
            ("notifications/roots/list_changed", None),
            ("notifications/progress", {"progressToken": 1, "progress": 0.5}),
            ("notifications/whatever", rng.choice(JUNK_VALUES)),
        ])
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        return msg


# -- mutations ------------------------------------------------------------------------------------

def _nest(rng: random.Random) -> bytes:
    depth = rng.choice([50, 127, 128, 129, 200, 1000, 5000])
    inner = rng.choice([b"[", b'{"a":'])
    close = b"]" if inner == b"[" else b"}"
    body = inner * depth + b"1" + close * depth * rng.choice([1, 1, 0])
    return b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"value":' + body + b"}}}"


def json_mutation(rng: random.Random, msg: dict[str, Any]) -> Any:
    """Change the message's structure: drop, retype or inflate a field, or wrap it."""
    msg = json.loads(json.dumps(msg))
    kind = rng.randrange(10)
    if kind == 0 and msg:
        msg.pop(rng.choice(list(msg)))
    elif kind == 1:
        msg[rng.choice(["id", "method", "jsonrpc", "params", "result", "error"])] = rng.choice(JUNK_VALUES + WEIRD_IDS)
    elif kind == 2 and isinstance(msg.get("params"), dict) and msg["params"]:
        msg["params"][rng.choice(list(msg["params"]))] = rng.choice(JUNK_VALUES)
    elif kind == 3:
        msg["params"] = {f"k{i}": i for i in range(rng.choice([100, 10_000]))}
    elif kind == 4:
        return [msg, dict(msg, id=rng.choice(WEIRD_IDS)), rng.choice(JUNK_VALUES)][: rng.randint(0, 3)]
    elif kind == 5:
        msg.pop("method", None)
        msg[rng.choice(["result", "error"])] = rng.choice([{}, {"code": "x"}, {"code": -1, "message": "m"}, None])
    elif kind == 6:
        msg["id"] = rng.choice(WEIRD_IDS)
    elif kind == 7:
        msg["params"] = {"_meta": rng.choice([meta("1999-01-01"), meta(rng.choice(HANDSHAKE)), {"io.modelcontextprotocol/protocolVersion": STATELESS}, []])}
    elif kind == 8:
        msg["extra"] = rng.choice(JUNK_VALUES)
    else:
        msg = rng.choice(JUNK_VALUES)
    return msg


def byte_mutation(rng: random.Random, data: bytes) -> bytes:
    """Damage the encoded bytes."""
    kind = rng.randrange(9)
    at = rng.randrange(len(data)) if data else 0
    if kind == 0:
        return data[:at] + rng.choice([b"\xff", b"\xfe", b"\xc0\x80", b"\xed\xa0\x80", b"\xc3", b"\xf4\x90\x80\x80"]) + data[at:]
    if kind == 1:
        return data[:at]
    if kind == 2:
        return data[:at] + bytes([rng.randrange(256)]) + data[at + 1:]
    if kind == 3:
        return b"\xef\xbb\xbf" + data
    if kind == 4:
        return data + rng.choice([b"}", b"]", b" garbage", b"\x00", b"{"])
    if kind == 5:
        return data.replace(b'"', b"'", 1)
    if kind == 6:
        return data[:at] + b'\\ud800' + data[at:]
    if kind == 7:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
    return data + data


def hostile_frame(rng: random.Random, corpus: Corpus, stateless: bool, version: str, oversize: int) -> bytes:
    """One frame: mostly well-formed traffic, the rest damaged in one way or another."""
    roll = rng.random()
    base: Any = corpus.request(stateless, version) if rng.random() < 0.85 else corpus.notification()
    if roll < 0.40:
        return json.dumps(base).encode()
    if roll < 0.65:
        return json.dumps(json_mutation(rng, base)).encode()
    if roll < 0.90:
        return byte_mutation(rng, json.dumps(base).encode())
    if roll < 0.97:
        return _nest(rng)
    if roll < 0.995:
        return json.dumps({"jsonrpc": "2.0", "id": corpus.next_id(), "method": "tools/call",
                           "params": {"name": "echo", "arguments": {"value": "y" * rng.choice([10_000, 1_000_000])}}}).encode()
    return b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"z" * oversize + b'"}}'

"""The scripted peer (tests/scripted_server.py) and its wire log, shared by the client behaviour tests."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import mcpkit.client as mc
from mcpkit.client import errors as E
from mcpkit.client.session import Handlers, Session

from .http_helpers import HttpServer

PEER = str(Path(__file__).with_name("scripted_server.py"))


def peer(*args: str) -> list[str]:
    return [sys.executable, PEER, *args]


class Wire:
    """The scripted peer's log."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def inbound(self) -> list[dict[str, Any]]:
        return [e for e in self.entries() if e["dir"] == "in"]

    def outbound(self) -> list[dict[str, Any]]:
        return [e for e in self.entries() if e["dir"] == "out"]

    def methods(self) -> list[str]:
        """What the client sent, in order: method names, or ``response:ID`` for its answers."""
        return [e["msg"]["method"] if "method" in e["msg"] else f"response:{e['msg'].get('id')}"
                for e in self.inbound()]

    def traffic(self) -> list[str]:
        """``methods()`` without the ``client.ping()`` barriers (``ping``, or a later
        ``server/discover`` in the stateless era, where ping is gone)."""
        return [m for i, m in enumerate(self.methods()) if m != "ping" and not (m == "server/discover" and i > 0)]

    def received(self, method: str) -> list[dict[str, Any]]:
        return [e for e in self.inbound() if e["msg"].get("method") == method]

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        return [e["msg"] for e in self.received("tools/call")
                if tool is None or e["msg"]["params"]["name"] == tool]

    def pids(self) -> list[int]:
        seen: list[int] = []
        for e in self.entries():
            if e["pid"] not in seen:
                seen.append(e["pid"])
        return seen


@pytest.fixture
def wire(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Wire:
    path = tmp_path / "peer.log"
    monkeypatch.setenv("SCRIPTED_PEER_LOG", str(path))
    return Wire(path)


@pytest.fixture(autouse=True)
def fresh_era_memory():
    mc.forget_eras()
    yield
    mc.forget_eras()


def handshake(*args: str) -> list[str]:
    return peer("--era", "legacy", *args)


async def wait_for(condition, timeout: float = 2.0) -> None:
    with trio.fail_after(timeout):
        while not condition():
            await trio.sleep(0.01)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

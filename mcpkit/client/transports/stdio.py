"""Run an MCP server as a subprocess and speak newline-delimited JSON on its stdin/stdout."""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
from typing import Any, Sequence

import trio

from ...protocol.framing import LineSplitter, Oversized
from ...protocol.jsonrpc import RequestId
from ..errors import BadResponse, ConnectionClosed, ConnectionFailed
from . import Deliver, Failure, deliver_frame
from ._pipe import PipeClosed, PipeReader, PipeWriter

log = logging.getLogger("mcpkit.client")
_MAX_LINE = 64 * 1024 * 1024


class StdioTransport:
    kind = "stdio"

    def __init__(self, command: str | Sequence[str], *, env: dict[str, str] | None = None,
                 cwd: str | None = None, stderr: Any = None, close_grace: float = 2.0,
                 max_line: int = _MAX_LINE) -> None:
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise ConnectionFailed("empty server command")
        self.env = env
        self.cwd = cwd
        self.stderr = stderr
        self.close_grace = close_grace
        #: a longer line from the server is dropped (and reported) without being kept
        self.max_line = max_line
        self.protocol_version: str | None = None
        self._proc: trio.Process | None = None
        self._writer: PipeWriter | None = None
        self._reader: PipeReader | None = None
        self._closing = False

    def describe(self) -> dict[str, Any]:
        return {"transport": "stdio", "command": self.argv}

    async def start(self, nursery: trio.Nursery, deliver: Deliver) -> None:
        env = None if self.env is None else {**os.environ, **self.env}
        try:
            self._proc = await trio.lowlevel.open_process(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self.stderr, env=env, cwd=self.cwd)
        except OSError as exc:
            raise ConnectionFailed(f"could not start {self.argv[0]!r}: {exc.strerror or exc}") from None
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._writer = PipeWriter(self._proc.stdin.fileno())
        self._reader = PipeReader(self._proc.stdout.fileno())
        nursery.start_soon(self._read, deliver)

    async def _read(self, deliver: Deliver) -> None:
        assert self._proc is not None and self._reader is not None
        lines = LineSplitter(self.max_line)
        pipe = self._reader
        try:
            while True:
                chunk = await pipe.read()
                if not chunk:
                    break
                for line in lines.feed(chunk):
                    if isinstance(line, Oversized):
                        deliver(Failure(None, BadResponse(f"the server sent a line of {line.size} bytes, over the "
                                                          f"limit of {self.max_line}")))
                    else:
                        deliver_frame(line, deliver)
        except (PipeClosed, trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        if self._closing:
            return
        code = await self._proc.wait() if self._proc.returncode is None else self._proc.returncode
        deliver(Failure(None, ConnectionClosed(f"the server process exited (code {code})")))

    async def send(self, frame: bytes, *, request_id: RequestId | None = None,
                   headers: dict[str, str] | None = None, stateless: bool = False) -> None:
        """One write per frame (the line with its newline); no pass through the scheduler
        when the pipe takes it at once."""
        writer = self._writer
        if writer is None or self._closing:
            raise ConnectionClosed("the server process is not running")
        try:
            await writer.write(frame + b"\n")
        except (PipeClosed, trio.BrokenResourceError, trio.ClosedResourceError):
            raise ConnectionClosed("the server process closed its input") from None

    def abort(self, request_id: RequestId) -> bool:
        return False

    async def aclose(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._closing = True
        with trio.CancelScope(shield=True):
            if proc.stdin is not None:
                if self._writer is not None:
                    self._writer.close()
                with trio.move_on_after(1):
                    await proc.stdin.aclose()
            with trio.move_on_after(self.close_grace):
                await proc.wait()
            if proc.returncode is None:
                proc.terminate()
                with trio.move_on_after(self.close_grace):
                    await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            if proc.stdout is not None:
                if self._reader is not None:
                    self._reader.closed = True
                await proc.stdout.aclose()

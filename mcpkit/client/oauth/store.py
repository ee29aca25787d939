"""Where the OAuth client keeps tokens and client registrations between runs.

Entries are keyed: ``tokens <resource>`` (the resource's tokens and the issuer they came
from) and ``client <issuer> <redirect>`` (a registration, bound to the issuer that made it).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Protocol

import trio


class TokenStore(Protocol):
    async def get(self, key: str) -> dict[str, Any] | None: ...

    async def set(self, key: str, value: dict[str, Any] | None) -> None:
        """Store ``value`` under ``key``; None deletes it."""


class MemoryTokenStore:
    """Kept for the life of the process (the default)."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, Any]] = {}

    async def get(self, key: str) -> dict[str, Any] | None:
        return self._data.get(key)

    async def set(self, key: str, value: dict[str, Any] | None) -> None:
        if value is None:
            self._data.pop(key, None)
        else:
            self._data[key] = value


class FileTokenStore:
    """A JSON file readable by its owner only (0600), replaced atomically on each change.
    Holds refresh tokens: keep it where other users cannot read it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = trio.Lock()

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return {}  # unreadable or damaged: start over rather than fail every run
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".tokens-", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise

    async def get(self, key: str) -> dict[str, Any] | None:
        async with self._lock:
            return (await trio.to_thread.run_sync(self._read)).get(key)

    async def set(self, key: str, value: dict[str, Any] | None) -> None:
        async with self._lock:
            def change() -> None:
                data = self._read()
                if value is None:
                    data.pop(key, None)
                else:
                    data[key] = value
                self._write(data)

            await trio.to_thread.run_sync(change)

    async def forget(self, prefix: str = "") -> int:
        """Drop every entry whose key contains ``prefix`` (all with ""); how many went."""
        async with self._lock:
            def change() -> int:
                data = self._read()
                gone = [k for k in data if prefix in k]
                for k in gone:
                    del data[k]
                self._write(data)
                return len(gone)

            return await trio.to_thread.run_sync(change)


def default_token_file() -> Path:
    """``$MCPKIT_TOKEN_FILE``, else ``oauth-tokens.json`` in mcpkit's data folder."""
    named = os.environ.get("MCPKIT_TOKEN_FILE")
    if named:
        return Path(named)
    base = os.environ.get("MCPKIT_DATA_DIR")
    if base:
        return Path(base) / "oauth-tokens.json"
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "mcpkit" / "oauth-tokens.json"

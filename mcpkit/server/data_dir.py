"""Where the server and its plugins keep their files (re-exported as ``mcpkit.data_dir``)."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    """Where plugins keep their data: ``$MCPKIT_DATA_DIR``, else ``$XDG_DATA_HOME/mcpkit``,
    else ``~/.local/share/mcpkit``. Created if missing."""
    base = os.environ.get("MCPKIT_DATA_DIR")
    if base:
        path = Path(base)
    else:
        xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        path = Path(xdg) / "mcpkit"
    path.mkdir(parents=True, exist_ok=True)
    return path

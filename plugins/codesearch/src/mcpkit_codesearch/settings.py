"""Plugin settings: `[plugins.codesearch]` keys `database` and `max_file_size`."""

import os
import tomllib
from pathlib import Path
from typing import Any

from .engine import DEFAULT_MAX_FILE_SIZE

DATABASE_NAME = "codesearch.sqlite3"
ENV_PREFIX = "MCPKIT_PLUGIN__CODESEARCH__"


class SettingsError(ValueError):
    pass


def default_database() -> Path:
    """`mcpkit.data_dir()/codesearch.sqlite3` ($MCPKIT_DATA_DIR, else XDG data home)."""
    import mcpkit  # the only mcpkit use outside plugin.py; kept lazy

    return mcpkit.data_dir() / DATABASE_NAME


def resolve(config: dict[str, Any]) -> tuple[Path, int]:
    """(database path, max file size) from a plugin config table."""
    unknown = set(config) - {"database", "max_file_size"}
    if unknown:
        raise SettingsError(
            f"[plugins.codesearch]: unknown setting(s) {', '.join(sorted(unknown))} "
            "(known: database, max_file_size)")
    db = config.get("database")
    if db is not None and (not isinstance(db, str) or not db.strip()):
        raise SettingsError("[plugins.codesearch] database must be a non-empty path string")
    size = config.get("max_file_size", DEFAULT_MAX_FILE_SIZE)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise SettingsError("[plugins.codesearch] max_file_size must be a positive integer (bytes)")
    path = Path(db).expanduser() if db else default_database()
    return path, size


def config_from_environment(config_file: str | None = None) -> dict[str, Any]:
    """The plugin table as `mcpkit serve` would see it, for the CLI commands.

    Reads `[plugins.codesearch]` from `config_file` (default `$MCPKIT_CONFIG`) and applies
    `MCPKIT_PLUGIN__CODESEARCH__KEY` variables on top.
    """
    out: dict[str, Any] = {}
    path = config_file or os.environ.get("MCPKIT_CONFIG")
    if path:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise SettingsError(f"cannot read config file {path}: {exc}") from None
        table = data.get("plugins", {}).get("codesearch", {})
        if isinstance(table, dict):
            out.update(table)
    for key, raw in os.environ.items():
        if key.startswith(ENV_PREFIX):
            try:
                value: Any = tomllib.loads(f"v = {raw}")["v"]
            except tomllib.TOMLDecodeError:
                value = raw
            out[key[len(ENV_PREFIX):].lower()] = value
    return out

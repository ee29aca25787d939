"""Plugin settings: the `[plugins.codesearch]` table."""

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .engine import DEFAULT_MAX_FILE_SIZE, DEFAULT_MAX_FILES, DEFAULT_MAX_INDEX_BYTES

DATABASE_NAME = "codesearch.sqlite3"
ENV_PREFIX = "MCPKIT_PLUGIN__CODESEARCH__"


class SettingsError(ValueError):
    pass


def default_database() -> Path:
    """`mcpkit.data_dir()/codesearch.sqlite3` ($MCPKIT_DATA_DIR, else XDG data home)."""
    import mcpkit  # the only mcpkit use outside plugin.py; kept lazy

    return mcpkit.data_dir() / DATABASE_NAME


@dataclass(frozen=True)
class Settings:
    """The plugin's settings, checked."""

    database: Path
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    #: directories index_repository may read under (the tool only; the CLI is the operator)
    roots: tuple[Path, ...] = ()
    max_files: int = DEFAULT_MAX_FILES
    max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES


KNOWN = ("database", "max_file_size", "roots", "max_files", "max_index_bytes")


def _positive(config: dict[str, Any], key: str, default: int, unit: str) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SettingsError(f"[plugins.codesearch] {key} must be a positive integer ({unit})")
    return value


def resolve(config: dict[str, Any]) -> Settings:
    """Settings from a plugin config table; SettingsError names the bad key."""
    unknown = set(config) - set(KNOWN)
    if unknown:
        raise SettingsError(
            f"[plugins.codesearch]: unknown setting(s) {', '.join(sorted(unknown))} "
            f"(known: {', '.join(KNOWN)})")
    db = config.get("database")
    if db is not None and (not isinstance(db, str) or not db.strip()):
        raise SettingsError("[plugins.codesearch] database must be a non-empty path string")
    roots = config.get("roots", ["~"])
    if isinstance(roots, str):
        roots = [roots]
    if not isinstance(roots, list) or not all(isinstance(r, str) and r.strip() for r in roots):
        raise SettingsError("[plugins.codesearch] roots must be a list of directory paths")
    return Settings(
        database=Path(db).expanduser() if db else default_database(),
        max_file_size=_positive(config, "max_file_size", DEFAULT_MAX_FILE_SIZE, "bytes"),
        roots=tuple(Path(r).expanduser().resolve() for r in roots),
        max_files=_positive(config, "max_files", DEFAULT_MAX_FILES, "files per run"),
        max_index_bytes=_positive(config, "max_index_bytes", DEFAULT_MAX_INDEX_BYTES, "bytes read per run"),
    )


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

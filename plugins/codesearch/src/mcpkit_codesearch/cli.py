"""`mcpkit index` and `mcpkit search`, added to the mcpkit CLI by the plugin hook."""

import sys
import time

import click

from .engine import CodeSearch, UserError
from .indexer import RunProgress
from .settings import SettingsError, config_from_environment, resolve


def _engine(database: str | None, config_file: str | None,
            max_file_size: int | None = None) -> CodeSearch:
    try:
        config = config_from_environment(config_file)
        if database:
            config["database"] = database
        if max_file_size is not None:
            config["max_file_size"] = max_file_size
        s = resolve(config)
        return CodeSearch(s.database, max_file_size=s.max_file_size, max_files=s.max_files,
                          max_index_bytes=s.max_index_bytes)
    except (SettingsError, *UserError) as exc:
        raise click.ClickException(str(exc)) from None


_database = click.option(
    "--database", type=click.Path(dir_okay=False),
    help="SQLite file (default: [plugins.codesearch] database, else "
         "$MCPKIT_DATA_DIR/codesearch.sqlite3).")
_config = click.option(
    "--config", "config_file", type=click.Path(dir_okay=False), envvar="MCPKIT_CONFIG",
    help="mcpkit TOML config to read [plugins.codesearch] from.")


class _StatusLine:
    """Progress on stderr: one rewritten line on a terminal, a line a second otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.width = 0

    def __call__(self, run: RunProgress) -> None:
        if run.phase == "done":
            return  # the summary line follows
        now = time.monotonic()
        final = run.phase == "committing"
        if not final and now - self.last < (0.1 if self.tty else 1.0):
            return
        self.last = now
        if run.total:
            pct = 100 * run.done // run.total
            text = f"{run.phase}: {run.done}/{run.total} files ({pct}%)"
        else:
            text = f"{run.phase}..."
        if self.tty:
            click.echo("\r" + text.ljust(self.width), err=True, nl=False)
            self.width = len(text)
        else:
            click.echo(text, err=True)

    def end(self) -> None:
        if self.tty and self.width:
            click.echo(err=True)


@click.command("index")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--project", help="Project name (default: the directory name).")
@click.option("--ref", help="Index this git commit/branch/tag without checking it out.")
@click.option("--max-file-size", type=click.IntRange(min=1), help="Skip larger files (bytes).")
@_database
@_config
def index_command(path: str, project: str | None, ref: str | None, max_file_size: int | None,
                  database: str | None, config_file: str | None) -> None:
    """Index a directory or git repository for code search."""
    engine = _engine(database, config_file, max_file_size)
    status = _StatusLine()
    try:
        result = engine.index(path, ref=ref, project=project, progress=status)
    except UserError as exc:
        status.end()
        raise click.ClickException(str(exc)) from None
    finally:
        engine.close(wait=0)
    status.end()
    click.echo(
        f"{result.project}: run {result.run_id} {result.status} in {result.duration_ms} ms - "
        f"{result.files_added} added, {result.files_updated} updated, "
        f"{result.files_removed} removed, {result.files_unchanged} unchanged, "
        f"{result.files_skipped} skipped")


@click.command("search")
@click.argument("term")
@click.option("--project", help="Only this project.")
@click.option("--path", "path_glob", help="Glob on the relative path, e.g. '*.py'.")
@click.option("--limit", type=click.IntRange(1, 500), default=20, show_default=True)
@click.option("-s", "--case-sensitive", is_flag=True, help="Match case (default: ignore it).")
@click.option("-e", "--regex", is_flag=True, help="TERM is a Python regular expression.")
@_database
@_config
def search_command(term: str, project: str | None, path_glob: str | None, limit: int,
                   case_sensitive: bool, regex: bool, database: str | None,
                   config_file: str | None) -> None:
    """Search indexed code; prints project:path:line:text like grep (exit 1: no match)."""
    engine = _engine(database, config_file)
    try:
        found = engine.search(term, project=project, path=path_glob, limit=limit,
                              case_sensitive=case_sensitive, regex=regex)
    except UserError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        engine.close(wait=0)
    for hit in found.results:
        click.echo(f"{hit.project}:{hit.path}:{hit.line}:{hit.snippet}")
    if found.truncated:
        click.echo(f"({found.total - len(found.results)} more matching lines; "
                   "raise --limit to see them)", err=True)
    if not found.results:
        sys.exit(1)

"""The `mcpkit index` / `mcpkit search` commands, run through click and through the real
`mcpkit` executable."""

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from mcpkit_codesearch.cli import index_command, search_command

from .conftest import commit_all, git_init, write


def test_index_then_search_prints_grep_like_lines(tmp_path: Path) -> None:
    repo = git_init(tmp_path / "demo")
    write(repo, "src/main.py", "import os\n\ndef handler(event):\n    return event\n")
    write(repo, "docs/guide.md", "Call handler() from the loop.\n")
    commit_all(repo, "init")
    db = str(tmp_path / "cli.sqlite3")
    runner = CliRunner()
    indexed = runner.invoke(index_command, [str(repo), "--database", db])
    assert indexed.exit_code == 0, indexed.output
    assert "demo: run 1 completed" in indexed.output and "2 added" in indexed.output
    found = runner.invoke(search_command, ["handler", "--database", db])
    assert found.exit_code == 0
    assert found.output.splitlines() == [
        "demo:docs/guide.md:1:Call handler() from the loop.",
        "demo:src/main.py:3:def handler(event):",
    ]
    only_py = runner.invoke(search_command, ["HANDLER", "--path", "*.py", "--database", db])
    assert only_py.output.splitlines() == ["demo:src/main.py:3:def handler(event):"]
    exact = runner.invoke(search_command, ["HANDLER", "-s", "--database", db])
    assert exact.exit_code == 1 and exact.output == ""
    bad = runner.invoke(search_command, ["(", "--regex", "--database", db])
    assert bad.exit_code == 1 and "invalid regular expression" in bad.output
    limited = runner.invoke(search_command, ["e", "--limit", "1", "--project", "demo",
                                             "--database", db])
    assert len(limited.stdout.splitlines()) == 1 and "more matching lines" in limited.stderr


def test_real_mcpkit_executable_uses_the_data_dir_default(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("mcpkit")
    root = tmp_path / "proj"
    write(root, "a.txt", "needle in a haystack\n")
    env = {**os.environ, "MCPKIT_DATA_DIR": str(tmp_path / "data")}
    env.pop("MCPKIT_CONFIG", None)
    idx = subprocess.run([str(exe), "index", str(root), "--project", "p"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert idx.returncode == 0, idx.stderr
    assert (tmp_path / "data" / "codesearch.sqlite3").exists()
    out = subprocess.run([str(exe), "search", "NEEDLE"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout == "p:a.txt:1:needle in a haystack\n"
    config = tmp_path / "mcpkit.toml"
    config.write_text(f'[plugins.codesearch]\ndatabase = "{tmp_path / "other.sqlite3"}"\n')
    other = subprocess.run([str(exe), "search", "needle", "--config", str(config)], env=env,
                           capture_output=True, text=True, timeout=60)
    assert other.returncode == 1 and other.stdout == ""  # a different, empty database

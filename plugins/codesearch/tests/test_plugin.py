"""The mcpkit wiring in-process: hooks, settings, errors mapped to mcpkit's exceptions."""

from pathlib import Path

import mcpkit
import pytest

from mcpkit_codesearch import plugin
from mcpkit_codesearch.settings import config_from_environment, resolve

from .conftest import write


def _tools(config: dict[str, object]) -> dict[str, object]:
    return {t.name: t for t in plugin.mcpkit_tools(config)}


def test_settings_defaults_and_validation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPKIT_DATA_DIR", str(tmp_path / "data"))
    defaults = resolve({})
    assert (defaults.database, defaults.max_file_size) == (tmp_path / "data" / "codesearch.sqlite3", 1024 * 1024)
    assert defaults.roots == (Path.home().resolve(),)
    assert resolve({"database": "~/x.db", "max_file_size": 10}).max_file_size == 10
    assert resolve({"roots": [str(tmp_path), "~"]}).roots == (tmp_path.resolve(), Path.home().resolve())
    for bad in ({"max_file_size": 0}, {"max_file_size": "big"}, {"database": ""},
                {"databse": "typo.db"}, {"roots": [1]}, {"roots": [""]}, {"max_files": 0},
                {"max_index_bytes": True}):
        with pytest.raises(ValueError, match=r"\[plugins.codesearch\]"):
            plugin.engine_for(bad)
    config = tmp_path / "c.toml"
    config.write_text('[plugins.codesearch]\ndatabase = "/from/file.db"\nmax_file_size = 5\n')
    monkeypatch.setenv("MCPKIT_PLUGIN__CODESEARCH__MAX_FILE_SIZE", "7")
    assert config_from_environment(str(config)) == {"database": "/from/file.db",
                                                    "max_file_size": 7}


def test_tools_and_resource_through_the_hooks(tmp_path: Path) -> None:
    config = {"database": str(tmp_path / "p.sqlite3"), "roots": [str(tmp_path)]}
    assert plugin.engine_for(config) is plugin.engine_for(dict(config))
    tools = _tools(config)
    assert set(tools) == {"index_repository", "index_status", "search_code",
                          "list_recent_files"}
    root = tmp_path / "proj"
    write(root, "m.py", "answer = 42\n")
    result = tools["index_repository"](repository=str(root))
    assert result.status == "completed" and result.files_added == 1
    found = tools["search_code"](term="ANSWER")
    assert found.results[0].path == "m.py"
    with pytest.raises(mcpkit.ToolError, match="invalid regular expression"):
        tools["search_code"](term="[", regex=True)
    with pytest.raises(mcpkit.ToolError, match="does not exist"):
        tools["index_repository"](repository=str(tmp_path / "nowhere"))
    with pytest.raises(mcpkit.ToolError, match="unknown index run 999"):
        tools["index_status"](run_id=999)
    (read,) = plugin.mcpkit_resources(config)
    assert read(project="proj", path="m.py") == "answer = 42\n"
    for bad in ("../proj/m.py", "nope.py"):
        with pytest.raises(mcpkit.ResourceNotFound):
            read(project="proj", path=bad)
    names = {c.name for c in plugin.mcpkit_cli_commands()}
    assert names == {"index", "search"}


def test_index_repository_reads_only_under_the_roots(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    write(allowed, "ok.py", "fine = 1\n")
    write(tmp_path / "elsewhere", "secret.txt", "root:x:0:0\n")
    tools = _tools({"database": str(tmp_path / "p.sqlite3"), "roots": [str(allowed)]})
    assert tools["index_repository"](repository=str(allowed)).files_added == 1
    for outside in (tmp_path / "elsewhere", tmp_path, Path("/etc"), Path("/")):
        with pytest.raises(mcpkit.ToolError, match=r"outside the directories .* \[plugins.codesearch\] roots"):
            tools["index_repository"](repository=str(outside))
    (allowed / "link").symlink_to(tmp_path / "elsewhere")  # resolved before the check
    with pytest.raises(mcpkit.ToolError, match="outside"):
        tools["index_repository"](repository=str(allowed / "link"))
    with pytest.raises(mcpkit.ToolError, match="outside"):  # refused before any run starts
        tools["index_repository"](repository="/etc", wait=False)
    assert tools["search_code"](term="root:x:0").total == 0


def test_pseudo_filesystems_are_refused_even_when_allowed(tmp_path: Path) -> None:
    tools = _tools({"database": str(tmp_path / "p.sqlite3"), "roots": ["/"]})
    for pseudo in ("/proc", "/sys/kernel", "/dev"):
        with pytest.raises(mcpkit.ToolError, match="pseudo-filesystem"):
            tools["index_repository"](repository=pseudo)


def test_special_files_are_never_opened(tmp_path: Path) -> None:
    import os

    root = tmp_path / "tree"
    write(root, "a.py", "alpha = 1\n")
    os.mkfifo(root / "pipe.py")  # opening it for reading would block for ever
    tools = _tools({"database": str(tmp_path / "p.sqlite3"), "roots": [str(tmp_path)]})
    result = tools["index_repository"](repository=str(root))
    assert result.status == "completed" and result.files_added == 1


def test_per_run_caps_on_files_and_bytes(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    for i in range(5):
        write(root, f"f{i}.txt", "x" * 1000 + "\n")
    few = _tools({"database": str(tmp_path / "a.sqlite3"), "roots": [str(tmp_path)], "max_files": 4})
    with pytest.raises(mcpkit.ToolError, match=r"more than 4 files.*\[plugins.codesearch\] max_files"):
        few["index_repository"](repository=str(root))
    small = _tools({"database": str(tmp_path / "b.sqlite3"), "roots": [str(tmp_path)], "max_index_bytes": 3000})
    with pytest.raises(mcpkit.ToolError, match=r"over the 3000 bytes.*\[plugins.codesearch\] max_index_bytes"):
        small["index_repository"](repository=str(root))
    roomy = _tools({"database": str(tmp_path / "c.sqlite3"), "roots": [str(tmp_path)], "max_files": 5})
    assert roomy["index_repository"](repository=str(root)).files_added == 5

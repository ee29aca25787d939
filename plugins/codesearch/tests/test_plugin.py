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
    assert resolve({}) == (tmp_path / "data" / "codesearch.sqlite3", 1024 * 1024)
    assert resolve({"database": "~/x.db", "max_file_size": 10})[1] == 10
    for bad in ({"max_file_size": 0}, {"max_file_size": "big"}, {"database": ""},
                {"databse": "typo.db"}):
        with pytest.raises(ValueError, match=r"\[plugins.codesearch\]"):
            plugin.engine_for(bad)
    config = tmp_path / "c.toml"
    config.write_text('[plugins.codesearch]\ndatabase = "/from/file.db"\nmax_file_size = 5\n')
    monkeypatch.setenv("MCPKIT_PLUGIN__CODESEARCH__MAX_FILE_SIZE", "7")
    assert config_from_environment(str(config)) == {"database": "/from/file.db",
                                                    "max_file_size": 7}


def test_tools_and_resource_through_the_hooks(tmp_path: Path) -> None:
    config = {"database": str(tmp_path / "p.sqlite3")}
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

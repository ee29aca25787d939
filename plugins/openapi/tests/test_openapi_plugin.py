"""The mcpkit wiring, called in-process (no transport)."""

from __future__ import annotations

from pathlib import Path

import pytest

import mcpkit
from mcpkit_openapi import plugin

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setenv("MCPKIT_DATA_DIR", str(tmp_path / "data"))
    config = {"specs": [str(FIXTURES / "petstore-3.0.yaml")], "timeout": 3}
    return {t.name: t for t in plugin.mcpkit_tools(config)}


def test_tool_definitions(tools: dict) -> None:
    search, get = tools["search_ids"], tools["get_operation"]
    assert search.timeout == 3 and get.timeout == 3
    assert search.annotations["readOnlyHint"] is True
    props = search.input_schema["properties"]
    assert props["query"]["minLength"] == 1 and props["query"]["maxLength"] == 500
    assert props["limit"]["minimum"] == 1 and props["limit"]["maximum"] == 20 and props["limit"]["default"] == 5
    assert search.input_schema["required"] == ["query"]
    assert "Example" in search.description and "similarity_score" in search.description
    assert "operations" in search.output_schema["properties"]
    with pytest.raises(ValueError, match="limit"):
        search.parse_arguments({"query": "pets", "limit": 21})
    with pytest.raises(ValueError, match="query"):
        search.parse_arguments({"query": "x" * 501})


def test_tools_called_directly(tools: dict, tmp_path: Path) -> None:
    result = tools["search_ids"](query="delete a pet", limit=2)
    assert result.operations[0].operation_id == "DELETE /pets/{petId}" and result.note is None
    structured = tools["search_ids"].to_result(result).structured
    assert set(structured["operations"][0]) == {"operation_id", "summary", "similarity_score", "method", "path"}
    details = tools["get_operation"](operation_id="listPets")
    out = tools["get_operation"].to_result(details).structured
    assert out["parameters"][0]["in"] == "query" and out["method"] == "GET"
    assert "api" not in out and "deprecated" not in out
    with pytest.raises(mcpkit.ToolError, match="listPets"):
        tools["get_operation"](operation_id="listPet")
    with pytest.raises(mcpkit.ToolError, match="no searchable words"):
        tools["search_ids"](query="  ?? ")
    assert list((tmp_path / "data" / "openapi-cache").glob("*.json"))  # default cache location


def test_default_timeout_and_embedded_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPKIT_DATA_DIR", str(tmp_path))
    tools = {t.name: t for t in plugin.mcpkit_tools({})}
    assert tools["search_ids"].timeout == 5.0
    result = tools["search_ids"](query="move this issue to done")
    assert result.operations[0].operation_id == "transitionIssue" and "embedded demo" in result.note


def test_bad_settings_fail_setup() -> None:
    with pytest.raises(ValueError, match="ranking"):
        plugin.mcpkit_tools({"ranking": "fuzzy"})

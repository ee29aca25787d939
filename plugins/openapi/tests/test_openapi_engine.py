from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mcpkit_openapi import engine as engine_mod
from mcpkit_openapi.engine import Engine, QueryError, Settings, SettingsError, UnknownOperation


@pytest.fixture(scope="module")
def demo() -> Engine:
    return Engine(Settings.from_config({"ranking": "lexical"}))


@pytest.fixture(scope="module")
def multi() -> Engine:
    fx = Path(__file__).parent / "fixtures"
    return Engine(Settings.from_config({"specs": [str(fx / "petstore-3.0.yaml"), str(fx / "shop-swagger-2.0.json")],
                                        "ranking": "lexical"}))


def test_settings_validation(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    s = Settings.from_config({"specs": ["a.json"], "cache_dir": str(tmp_path), "timeout": 2, "ranking": "lexical"},
                             default_cache=None)
    assert s.cache_dir == tmp_path and s.timeout == 2.0 and s.ranking == "lexical"
    assert Settings.from_config({}, default_cache=tmp_path).cache_dir == tmp_path
    for bad in ({"ranking": "magic"}, {"timeout": 0}, {"timeout": "5"}, {"specs": 5}, {"cache_dir": 3}):
        with pytest.raises(SettingsError):
            Settings.from_config(bad)
    with caplog.at_level(logging.WARNING, logger="mcpkit_openapi"):
        Settings.from_config({"spec": ["typo.json"]})
    assert "spec" in caplog.text


def test_hybrid_without_the_model_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Installed with --no-deps (the smallest install): lexical by default, and asking for
    hybrid is a clear setup error."""
    monkeypatch.setattr(engine_mod, "hybrid_available", lambda own_model=False: False)
    with pytest.raises(SettingsError, match="onnxruntime, numpy and the model package"):
        Settings.from_config({"ranking": "hybrid"})
    assert Settings.from_config({}).ranking == "lexical"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("move this issue to done", "transitionIssue"),
        ("who am I signed in as", "getCurrentUser"),
        ("report a new bug", "createIssue"),
        ("take the assignee off an issue", "unassignIssue"),
        ("write a reply on a ticket", "addComment"),
        ("find issues mentioning a crash", "searchIssues"),
        ("get rid of a label", "removeLabel"),
    ],
)
def test_demo_queries(demo: Engine, query: str, expected: str) -> None:
    assert expected in [h.operation_id for h in demo.search(query, 3)]


def test_search_results_shape(demo: Engine, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="mcpkit_openapi"):
        hits = demo.search("list the issues of a project", 4)
    assert 1 <= len(hits) <= 4 and hits[0].operation_id == "listIssues"
    scores = [h.similarity_score for h in hits]
    assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores)
    assert hits[0].method == "GET" and hits[0].path == "/projects/{projectKey}/issues"
    line = [r.getMessage() for r in caplog.records if "event=search_ids" in r.getMessage()][-1]
    assert 'query="list the issues of a project"' in line and "results=4" in line and "latency_ms=" in line
    assert demo.note and "embedded demo" in demo.note


def test_long_queries_are_truncated_in_the_log(demo: Engine, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="mcpkit_openapi"):
        demo.search("issue " * 80, 1)
    assert len(caplog.records[-1].getMessage()) < 300


def test_queries_without_words_are_rejected(demo: Engine) -> None:
    for q in ("   ", "?!", "..."):
        with pytest.raises(QueryError):
            demo.search(q, 5)
    assert demo.search("zzzz qqqq", 5) == []


def test_describe_and_unknown_ids(multi: Engine) -> None:
    d = multi.describe("shop:placeOrder")
    assert d["method"] == "POST" and d["path"] == "/orders" and d["api"] == "shop"
    assert d["request_body"]["schema"]["properties"]["status"]["enum"] == ["placed", "shipped"]
    assert multi.describe("placeOrder")["operation_id"] == "shop:placeOrder"  # unambiguous short id
    assert multi.describe("SHOP:PLACEORDER")["operation_id"] == "shop:placeOrder"
    with pytest.raises(UnknownOperation) as err:
        multi.describe("shop:placeOrdr")
    assert err.value.suggestions[0] == "shop:placeOrder"
    assert "Closest ids" in str(err.value) and "search_ids" in str(err.value)


def test_search_across_apis(multi: Engine) -> None:
    hits = multi.search("upload a receipt for an order", 3)
    assert hits[0].operation_id == "shop:uploadReceipt"
    assert multi.note is None


def test_note_when_every_spec_failed(tmp_path: Path) -> None:
    engine = Engine(Settings.from_config({"specs": [str(tmp_path / "gone.json")]}))
    assert engine.search("anything at all", 5) == []
    assert "gone.json" in engine.note

"""The retrieval evaluation on GitHub's REST API as a regression test.

Floors sit just below the figures measured when they were set (see README); a ranking change
that loses queries fails here. Needs npm to fetch ``@octokit/openapi`` once into the eval cache.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from mcpkit_openapi.ranking import hybrid_available

EVAL = Path(__file__).resolve().parents[1] / "eval" / "evaluate.py"
FLOORS = {"lexical": (0.82, 0.60), "hybrid": (0.90, 0.73)}  # recall@5, MRR


def _load():
    spec = importlib.util.spec_from_file_location("mcpkit_openapi_evaluate", EVAL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def evaluate():
    module = _load()
    cached = (module.cache_dir() / f"api.github.com-{module.NPM_VERSION}.json").exists()
    if not cached and shutil.which("npm") is None:
        pytest.skip("npm is not available to fetch the GitHub spec (@octokit/openapi) for the evaluation")
    module.spec_path()  # fetch now: a failure with npm present is a real failure
    return module


def test_query_set_is_well_formed() -> None:
    queries = _load().load_queries()
    assert len(queries) >= 40
    assert all(q["query"].strip() and q["expected"] for q in queries)
    assert len({q["query"] for q in queries}) == len(queries)


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_ranking_quality_floor(evaluate, mode: str) -> None:
    if mode == "hybrid" and not hybrid_available():
        pytest.skip("mcpkit-openapi[embeddings] is not installed")
    (result,) = evaluate.evaluate(mode, repeats=1, apis=["github"])
    assert result["operations"] > 1000
    recall_floor, mrr_floor = FLOORS[mode]
    missed = [m["query"] for m in result["misses"]]
    assert result["recall@5"] >= recall_floor, f"recall@5 {result['recall@5']:.3f}; missed: {missed}"
    assert result["mrr"] >= mrr_floor, f"MRR {result['mrr']:.3f}"
    if mode == "lexical":
        assert result["p50_ms"] < 20, "lexical search became far slower than ~1 ms"

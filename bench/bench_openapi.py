"""search_ids speed on GitHub's 1,223-operation spec: start-up, first query, p50/p95, RSS.

Usage::

    python bench/bench_openapi.py [--rounds 3] [--baseline-src PATH] [--modes lexical,hybrid]

"1st pass p50" is the median of the first pass over the queries, before anything a query
computes (the default mode's operation vectors) is cached. Each measurement runs in a fresh interpreter (so start-up and the first query are really
first), with the parsed-spec cache warm, as on every server start after the first. Rounds
alternate between the variants, because the machines here are shared and noisy. With
``--baseline-src`` (a ``src`` directory of another checkout of the plugin, e.g. main's), that
code is measured side by side in lexical mode as "baseline". The spec comes from the
evaluation cache (``plugins/openapi/eval/evaluate.py`` fetches it with npm).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "plugins" / "openapi" / "eval"

CHILD = r"""
import json, resource, statistics, sys, time
t0 = time.perf_counter()
from mcpkit_openapi.engine import Engine, Settings
spec, cache, mode, queries = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
engine = Engine(Settings.from_config({"specs": [spec], "cache_dir": cache, "ranking": mode}))
startup = time.perf_counter() - t0
t = time.perf_counter()
engine.search(queries[0], 5)
first = time.perf_counter() - t
lat = []
for _ in range(5):
    for q in queries:
        t = time.perf_counter()
        engine.search(q, 5)
        lat.append((time.perf_counter() - t) * 1000)
first_pass = sorted(lat[:len(queries)])  # before anything a query computes is cached
lat.sort()
print(json.dumps({"startup_s": startup, "first_query_ms": first * 1000, "p50_ms": statistics.median(lat),
                  "p95_ms": lat[int(0.95 * len(lat))], "first_pass_p50_ms": statistics.median(first_pass), "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "operations": len(engine.catalog.operations)}))
"""


def _spec() -> Path:
    sys.path.insert(0, str(EVAL))
    import evaluate  # the eval runner owns fetching and caching the GitHub spec

    return evaluate.spec_path()


def _queries() -> list[str]:
    return [q["query"] for q in json.loads((EVAL / "queries.json").read_text("utf-8"))["queries"]]


def _run(src: str | None, spec: Path, cache: Path, mode: str, queries: list[str]) -> dict[str, float]:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", CHILD, str(spec), str(cache), mode, json.dumps(queries)],
                          capture_output=True, text=True, env=env, timeout=300, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="lexical,hybrid")
    parser.add_argument("--baseline-src", default="", help="another checkout's plugins/openapi/src")
    args = parser.parse_args(argv)
    from mcpkit_openapi.ranking import hybrid_available

    spec, queries = _spec(), _queries()
    variants: list[tuple[str, str | None, str]] = []
    if args.baseline_src:
        variants.append(("baseline lexical", args.baseline_src, "lexical"))
    for mode in args.modes.split(","):
        if mode == "hybrid" and not hybrid_available():
            print("hybrid: skipped (install mcpkit-openapi[embeddings])", file=sys.stderr)
            continue
        variants.append((f"this {mode}", None, mode))
    rows: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in variants}
    with tempfile.TemporaryDirectory() as tmp:
        caches = {name: Path(tmp) / f"cache-{i}" for i, (name, _, _) in enumerate(variants)}
        for name, src, mode in variants:  # fill each variant's cache (parse, embeddings) once
            _run(src, spec, caches[name], mode, queries[:1])
        for _ in range(args.rounds):
            for name, src, mode in variants:
                rows[name].append(_run(src, spec, caches[name], mode, queries))
    print(f"GitHub spec, {rows[variants[0][0]][0]['operations']:.0f} operations, {len(queries)} queries x 5, "
          f"{args.rounds} alternating rounds, medians; warm parse cache")
    print(f"{'variant':<18} {'start-up s':>10} {'1st query ms':>12} {'p50 ms':>7} {'p95 ms':>7} "
          f"{'1st pass p50':>12} {'RSS MB':>7}")
    for name, results in rows.items():
        med = {k: statistics.median(r[k] for r in results) for k in results[0]}
        print(f"{name:<18} {med['startup_s']:>10.3f} {med['first_query_ms']:>12.1f} {med['p50_ms']:>7.2f} "
              f"{med['p95_ms']:>7.2f} {med['first_pass_p50_ms']:>12.2f} {med['rss_mb']:>7.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

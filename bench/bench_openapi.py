"""search_ids on GitHub's 1,223-operation spec, every ranking mode in one run: install size,
first answer with cold and warm caches, p50/p95 per query, RSS.

Usage::

    python bench/bench_openapi.py [--rounds 3] [--modes hybrid,lexical] [--baseline-src PATH]

Every measurement runs in a fresh interpreter. "First answer" is the time from the start of
that interpreter (before the plugin is imported) to the first ``search_ids`` result, asked
right after start-up ("1st query" is that query's own time):

* cold: an empty cache directory, so the spec is parsed (and, in hybrid mode, its operations
  are embedded in the background while the first answers are lexical);
* cold embeddings: the parse cache is warm but the embedding cache is empty (a new model, or
  the first hybrid start after a lexical one);
* warm: both caches filled, as on every start after the first.

"hybrid ready" is when the background embedding finished (cold runs). p50/p95 are over the
70 queries x 5 passes of a warm run, each query encoded anew (the query cache is cleared).
"Install" is the size on disk of the distributions the plugin's default install adds to
mcpkit's own (for lexical: the plugin's data files only). Rounds alternate between the
variants, because the machines here are shared and noisy. With ``--baseline-src`` (a ``src``
directory of another checkout of the plugin, e.g. main's) that code runs too, in its default
mode, as "baseline". The spec comes from the evaluation cache (``plugins/openapi/eval``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "plugins" / "openapi" / "eval"

CHILD = r"""
import json, resource, statistics, sys, time
t_start = float(sys.argv[5])
from mcpkit_openapi.engine import Engine, Settings
spec, cache, mode, queries = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
config = {"specs": [spec], "cache_dir": cache}
if mode != "default":
    config["ranking"] = mode
engine = Engine(Settings.from_config(config))
startup = time.perf_counter() - t_start
t = time.perf_counter()
engine.search(queries[0], 5)
first_query = time.perf_counter() - t
first_answer = time.perf_counter() - t_start
searcher = engine.searcher
ready = None
if getattr(searcher, "wait_ready", None) and searcher.mode == "hybrid":
    searcher.wait_ready(600)
    ready = time.perf_counter() - t_start
lat = []
for _ in range(5):
    for q in queries:
        if getattr(searcher, "semantic", None) is not None:
            searcher.semantic.clear_query_cache()
        t = time.perf_counter()
        engine.search(q, 5)
        lat.append((time.perf_counter() - t) * 1000)
lat.sort()
print(json.dumps({"startup_s": startup, "first_answer_s": first_answer, "first_query_ms": first_query * 1000, "hybrid_ready_s": ready,
                  "p50_ms": statistics.median(lat), "p95_ms": lat[int(0.95 * len(lat))],
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "operations": len(engine.catalog.operations), "mode": searcher.mode}))
"""


def _spec() -> Path:
    sys.path.insert(0, str(EVAL))
    import evaluate  # the eval runner owns fetching and caching the GitHub spec

    return evaluate.spec_path()


def _queries() -> list[str]:
    return [q["query"] for q in json.loads((EVAL / "queries.json").read_text("utf-8"))["queries"]]


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(name: str, seen: set[str]) -> set[str]:
    """The installed distributions ``name`` needs (not its extras), itself included."""
    if _key(name) in seen:
        return seen
    seen.add(_key(name))
    try:
        requires = metadata.distribution(name).requires or []
    except metadata.PackageNotFoundError:
        return seen
    for req in requires:
        if "extra ==" not in req:
            _closure(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0], seen)
    return seen


def _dist_bytes(name: str) -> int:
    dist = metadata.distribution(name)
    total = 0
    for f in dist.files or []:
        path = Path(str(dist.locate_file(f)))
        if path.is_file():
            total += path.stat().st_size
    return total


def install_sizes() -> dict[str, float]:
    """MB on disk that each mode adds to mcpkit: lexical = the plugin's data files; hybrid = the
    distributions the plugin's default install brings that mcpkit does not need."""
    import mcpkit_openapi

    data = Path(mcpkit_openapi.__file__).parent / "data"
    lexical = sum(p.stat().st_size for p in data.iterdir() if p.is_file())
    added = _closure("mcpkit-openapi", set()) - _closure("mcpkit", set()) - {"mcpkit-openapi", "pyyaml"}
    hybrid = lexical + sum(_dist_bytes(d) for d in added)
    return {"lexical": lexical / 1e6, "hybrid": hybrid / 1e6, "added": sorted(added)}  # type: ignore[dict-item]


def _run(src: str | None, spec: Path, cache: Path, mode: str, queries: list[str]) -> dict[str, float]:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    # perf_counter is CLOCK_MONOTONIC on Linux, shared by every process: the child measures its
    # times from this moment, before the interpreter starts
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(spec), str(cache), mode, json.dumps(queries), repr(start)],
                          capture_output=True, text=True, env=env, timeout=900, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="hybrid,lexical")
    parser.add_argument("--baseline-src", default="", help="another checkout's plugins/openapi/src")
    args = parser.parse_args(argv)
    from mcpkit_openapi.ranking import hybrid_available

    spec, queries = _spec(), _queries()
    variants: list[tuple[str, str | None, str]] = []
    if args.baseline_src:
        variants.append(("baseline", args.baseline_src, "default"))
    for mode in args.modes.split(","):
        if mode == "hybrid" and not hybrid_available():
            print("hybrid: skipped (onnxruntime / the model package are not installed)", file=sys.stderr)
            continue
        variants.append((mode, None, mode))
    scenarios = ("cold", "cold embeddings", "warm")
    rows: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        parsed = Path(tmp) / "parsed-only"
        _run(None, spec, parsed, "lexical", queries[:1])  # a parse cache without embeddings
        for n in range(args.rounds):
            for name, src, mode in variants:
                warm = Path(tmp) / f"warm-{name}"
                for scenario in scenarios:
                    if scenario == "cold embeddings" and mode == "lexical":
                        continue
                    if scenario == "warm" and not warm.exists():
                        _run(src, spec, warm, mode, queries[:1])  # fill parse and embedding caches
                    cache = {"cold": Path(tmp) / f"cold-{name}-{n}", "warm": warm}.get(scenario)
                    if cache is None:
                        cache = Path(tmp) / f"emb-{name}-{n}"
                        shutil.copytree(parsed, cache)
                    rows.setdefault((name, scenario), []).append(_run(src, spec, cache, mode, queries))
    sizes = install_sizes()
    print(f"GitHub spec, {next(iter(rows.values()))[0]['operations']:.0f} operations, {len(queries)} queries, "
          f"{args.rounds} alternating rounds, medians")
    print(f"install added: hybrid {sizes['hybrid']:.1f} MB ({', '.join(sizes['added'])} + data), "
          f"lexical {sizes['lexical']:.1f} MB (data files)")
    print(f"{'variant':<10} {'caches':<16} {'start-up s':>10} {'1st query ms':>12} {'1st answer s':>12} "
          f"{'hybrid ready s':>14} {'p50 ms':>7} {'p95 ms':>7} {'RSS MB':>7}")
    for (name, scenario), results in rows.items():
        med = {k: statistics.median(r[k] for r in results) for k in ("startup_s", "first_answer_s", "first_query_ms",
                                                                     "p50_ms", "p95_ms", "rss_mb")}
        ready = [r["hybrid_ready_s"] for r in results if r.get("hybrid_ready_s") is not None]
        ready_s = f"{statistics.median(ready):.2f}" if ready else "-"
        print(f"{name:<10} {scenario:<16} {med['startup_s']:>10.3f} {med['first_query_ms']:>12.1f} "
              f"{med['first_answer_s']:>12.3f} {ready_s:>14} "
              f"{med['p50_ms']:>7.2f} {med['p95_ms']:>7.2f} {med['rss_mb']:>7.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

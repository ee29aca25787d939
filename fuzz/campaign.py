"""A bounded fuzz and abuse campaign against real `mcpkit serve` processes (`make fuzz`).

    .venv/bin/python fuzz/campaign.py [--seconds 60] [--transports stdio,http,auth,redis,openapi-specs] [--seed 1] [--out report.json]

Each transport gets its own server, with the conformance fixture, codesearch, openapi and a
misbehaving test plugin loaded. For the given time per transport the campaign sends hostile
and careless traffic (fuzz/generate.py) and counts what must never happen: crashes (the
process exits), hangs (a liveness probe or a request unanswered for 10 s), 5xx answers
(a 503 with Retry-After excepted), non-JSON lines on stdout, JSON-RPC answers that are not
well formed. The auth leg (fuzz/drive_auth.py, a server taking JWTs) also counts forged or
misdirected tokens that were served, good ones that were refused and tokens in the log. The
redis leg (fuzz/drive_redis.py) serves over HTTP with shared state on a real redis-server that
it drives through refusals (OOM, READONLY, MISCONF), SIGSTOP and empty restarts meanwhile, and
also counts answers that leak internals. It also reports -32603 answers, tracebacks on stderr,
and the server's RSS and open fds after a warm-up and at the end. Then a last leg
(fuzz/hostile_repos.py, --repo-seconds) has codesearch index hostile git repositories and
counts the programs they made git run and the files from outside the allowed roots the server
served. Exit status 1 when anything that must never happen did, or memory grew by more than
--max-rss-growth-mib.

The openapi-specs leg (fuzz/openapi_specs.py) instead starts servers with hostile spec files
(deep nesting, YAML alias bombs, $ref fan-out) beside a good one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Tally  # noqa: E402
from drive_auth import run_auth  # noqa: E402
from drive_http import run_http  # noqa: E402
from drive_redis import run_redis  # noqa: E402
from drive_stdio import run_stdio  # noqa: E402
from hostile_repos import report as repos_report  # noqa: E402
from hostile_repos import run_hostile_repos  # noqa: E402
from openapi_specs import run_specs  # noqa: E402

LEGS = {"stdio": run_stdio, "http": run_http, "auth": run_auth, "redis": run_redis, "openapi-specs": run_specs}


def report(tallies: list[Tally], seconds: float, seed: int) -> str:
    rows = [
        ("frames / requests sent", lambda t: t.sent),
        ("crashes", lambda t: t.crashes),
        ("hangs", lambda t: t.hangs),
        ("5xx answers", lambda t: t.server_errors),
        ("non-JSON output", lambda t: t.non_json),
        ("malformed JSON-RPC", lambda t: t.malformed),
        ("-32603 answers", lambda t: t.internal),
        ("tracebacks on stderr", lambda t: t.tracebacks),
        ("answers leaking internals", lambda t: t.leaks),
        ("RSS after warm-up (MiB)", lambda t: f"{t.usage_start[0] / 1024:.1f}"),
        ("RSS at the end (MiB)", lambda t: f"{t.usage_end[0] / 1024:.1f}"),
        ("open fds after warm-up / end", lambda t: f"{t.usage_start[1]} / {t.usage_end[1]}"),
    ]
    out = [f"fuzz campaign: seed {seed}, {seconds:g} s per transport, {platform.node()} "
           f"({os.cpu_count()} CPUs, Python {platform.python_version()})",
           "| | " + " | ".join(t.transport for t in tallies) + " |", "|---|" + "---|" * len(tallies)]
    for name, get in rows:
        out.append(f"| {name} | " + " | ".join(str(get(t)) for t in tallies) + " |")
    for t in tallies:
        if t.statuses:
            out.append(f"{t.transport} statuses: " + ", ".join(f"{k}: {v}" for k, v in sorted(t.statuses.items())))
        if t.faults:
            out.append(f"{t.transport} faults driven: " + ", ".join(f"{k} x{v}" for k, v in t.faults.items()))
        for example in t.examples:
            out.append(f"  {t.transport}: {example}")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="time per transport")
    parser.add_argument("--transports", default=",".join(LEGS), help="legs to run, of " + ", ".join(LEGS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="write the tallies as JSON here")
    parser.add_argument("--max-rss-growth-mib", type=float, default=64.0)
    parser.add_argument("--repo-seconds", type=float, help="time for the hostile-repository leg "
                        "(fuzz/hostile_repos.py; default --seconds, at most 60; 0 skips it)")
    args = parser.parse_args()
    repo_seconds = min(args.seconds, 60.0) if args.repo_seconds is None else args.repo_seconds
    tallies: list[Tally] = []
    with tempfile.TemporaryDirectory(prefix="mcpkit-fuzz-") as tmp:
        work = Path(tmp)
        for transport in args.transports.split(","):
            started = time.monotonic()
            run = LEGS[transport]
            tally = run(args.seconds, args.seed, work / transport)
            print(f"{transport}: {tally.sent} sent in {time.monotonic() - started:.0f} s", file=sys.stderr)
            tallies.append(tally)
        repos = run_hostile_repos(repo_seconds, args.seed, work / "repos") if repo_seconds > 0 else None
    text = report(tallies, args.seconds, args.seed)
    if repos is not None:
        text += "\n\n" + repos_report(repos, repo_seconds, args.seed)
    print(text)
    if args.out:
        args.out.write_text(json.dumps([t.as_dict() for t in tallies], indent=2))
    grew = [t for t in tallies if (t.usage_end[0] - t.usage_start[0]) / 1024 > args.max_rss_growth_mib]
    return 1 if any(t.failed() for t in tallies) or grew or (repos is not None and repos.failed()) else 0


if __name__ == "__main__":
    sys.exit(main())

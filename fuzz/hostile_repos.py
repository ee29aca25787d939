"""The hostile-repository leg of the fuzz campaign (`fuzz/campaign.py` runs it after the transports).

    .venv/bin/python fuzz/hostile_repos.py [--seconds 30] [--seed 1] [--out repos.json]

One real `mcpkit serve --plugin codesearch` over stdio whose only root is the `allowed/` directory
of a scene built by plugins/codesearch/tests/hostile_git.py: beside it, `outside/` holds
repositories whose files say SECRET. First every known vector once, then random mixtures until the
time is up: a layout (a plain repository, a subdirectory of one, a linked work tree, a shared clone,
a partial clone, or a known vector) plus a random handful of the config keys that name programs,
written into the repository's config, a file it includes, or its per-worktree config; indexed as
a work tree or at a ref, waiting or polling `index_status`. Every program named is
`touch markers/<name>`.

Counts cases, completed and refused runs, executions (marker files: must be 0), leaks (files with the
secret that `search_code` finds and `code://` serves: must be 0), misses (a vector that must be refused
was indexed, or one that must be indexed was refused), -32603 answers, hangs (no answer within
60 s) and crashes. Exit status 1 when executions, leaks, misses, hangs or crashes are not 0.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugins" / "codesearch" / "tests"))
import hostile_git as hg  # noqa: E402

sys.path.insert(0, str(ROOT / "fuzz"))
from common import stop_server  # noqa: E402

MCPKIT = Path(sys.executable).with_name("mcpkit")
ANSWER_TIMEOUT = 60.0
MAX_CASES = 5000


@dataclass
class RepoTally:
    cases: int = 0
    completed: int = 0
    refused: int = 0
    executions: int = 0
    leaks: int = 0
    misses: int = 0
    internal: int = 0  # -32603 answers
    hangs: int = 0
    crashes: int = 0
    tracebacks: int = 0
    vectors: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def note(self, what: str) -> None:
        if len(self.examples) < 10:
            self.examples.append(what[:300])

    def failed(self) -> bool:
        return bool(self.executions or self.leaks or self.misses or self.hangs or self.crashes)


class Server:
    """`mcpkit serve --plugin codesearch` on stdio, one request at a time."""

    def __init__(self, work: Path, allowed: Path) -> None:
        config = work / "mcpkit.toml"
        config.write_text(f"[plugins.codesearch]\ndatabase = {json.dumps(str(work / 'cs.sqlite3'))}\n"
                          f"roots = [{json.dumps(str(allowed))}]\n")
        self.stderr = (work / "stderr.log").open("ab")
        self.proc = subprocess.Popen([str(MCPKIT), "serve", "--plugin", "codesearch", "--config", str(config)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     cwd=work, env={**os.environ, "MCPKIT_DATA_DIR": str(work / "data")})
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "fuzz-repos", "version": "0"}})
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The answer (a dict with result or error); raises TimeoutError or EOFError."""
        self.next_id += 1
        rid = self.next_id
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + ANSWER_TIMEOUT
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"{method} unanswered for {ANSWER_TIMEOUT:g} s") from None
            if line is None:
                raise EOFError(f"the server exited ({self.proc.wait()})")
            msg = json.loads(line)
            if isinstance(msg, dict) and msg.get("id") == rid:
                return msg

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def stop(self) -> None:
        stop_server(self.proc, self.stderr)


# -- random mixtures -----------------------------------------------------------------------------

def _layout(scene: hg.Scene, d: Path, rng: random.Random) -> tuple[str, Path, Path]:
    """(name, repository to index, work tree whose config may be poisoned)."""
    kind = rng.choice(["plain", "subdir", "linked", "shared", "promisor"])
    if kind == "plain":
        hg.new_repo(d, {"a.txt": "plain\n"})
        return kind, d, d
    if kind == "subdir":
        hg.new_repo(d, {"pkg/m.py": "plain\n"})
        return kind, d / "pkg", d
    if kind == "promisor":
        hg.promisor_clone(scene, d)
        return kind, d, d
    hg.new_repo(d / "main", {"a.txt": "plain\n"})
    if kind == "linked":
        hg.git(d / "main", "worktree", "add", "-q", "-b", "side", str(d / "linked"))
        return kind, d / "linked", d / "linked"
    hg.git(d, "clone", "-q", "--shared", str(d / "main"), str(d / "shared"))
    return kind, d / "shared", d / "shared"


def _poison(scene: hg.Scene, repo: Path, rng: random.Random) -> str:
    keys = rng.sample(hg.PROGRAM_KEYS, rng.randint(1, len(hg.PROGRAM_KEYS)))
    where = rng.choice(["config", "include", "includeIf", "worktree"])
    if where == "config":
        hg.name_programs(scene, repo, keys)
    elif where in ("include", "includeIf"):
        included = repo / "poison.cfg"
        hg.name_programs(scene, repo, keys, config=included)
        hg.git(repo, "config", "include.path" if where == "include" else "includeIf.onbranch:**.path", str(included))
    else:
        hg.git(repo, "config", "core.repositoryFormatVersion", "1")
        hg.git(repo, "config", "extensions.worktreeConfig", "true")
        hg.name_programs(scene, repo, keys, config=repo / hg.git(repo, "rev-parse", "--git-path", "config.worktree").strip())
    return f"{len(keys)} keys in {where}"


def _mixture(scene: hg.Scene, d: Path, rng: random.Random) -> tuple[str, hg.Case]:
    if rng.random() < 0.3:
        build = rng.choice(hg.EXECUTION_VECTORS + hg.ESCAPE_VECTORS)
        return build.__name__, build(scene, d)
    kind, repository, tree = _layout(scene, d, rng)
    how = _poison(scene, tree, rng)
    ref = rng.choice([None, "HEAD"]) if kind != "promisor" else rng.choice([None, "origin/main"])
    return f"{kind} + {how}", hg.Case(kind, repository, ref, (scene.allowed,), None)


# -- the run ---------------------------------------------------------------------------------------

def _index(server: Server, case: hg.Case, project: str, wait: bool) -> dict[str, Any]:
    args: dict[str, Any] = {"repository": str(case.repository), "project": project, "wait": wait}
    if case.ref is not None:
        args["ref"] = case.ref
    answer = server.tool("index_repository", args)
    result = answer.get("result") or {}
    if wait or result.get("isError"):
        return answer
    run_id = result["structuredContent"]["run_id"]
    deadline = time.monotonic() + ANSWER_TIMEOUT
    while time.monotonic() < deadline:
        status = server.tool("index_status", {"run_id": run_id})
        content = (status.get("result") or {}).get("structuredContent") or {}
        if content.get("status") != "running":
            if content.get("status") == "failed":
                return {"result": {"isError": True, "content": [{"type": "text", "text": content.get("error")}]}}
            return status
        time.sleep(0.05)
    raise TimeoutError(f"run {run_id} still running after {ANSWER_TIMEOUT:g} s")


def _check(server: Server, scene: hg.Scene, tally: RepoTally, name: str, case: hg.Case,
           project: str, rng: random.Random, leaked: set[str]) -> None:
    """Index one case, then count the programs that ran and the outside files now served."""
    answer = _index(server, case, project, wait=rng.random() < 0.8)
    if "error" in answer:
        tally.internal += answer["error"].get("code") == -32603
        tally.note(f"{name}: JSON-RPC error {answer['error']}")
        return
    refused = bool(answer["result"].get("isError"))
    tally.refused += refused
    tally.completed += not refused
    if case.refused is not None and refused != case.refused:
        tally.misses += 1
        tally.note(f"{name}: {'refused' if refused else 'indexed'}, expected the other: {answer['result']}")
    ran = scene.executions()
    if ran:
        tally.executions += len(ran)
        tally.note(f"{name}: ran {', '.join(ran)}")
        for marker in ran:
            (scene.markers / marker).unlink()
    found = server.tool("search_code", {"term": hg.SECRET, "limit": 500})
    hits = ((found.get("result") or {}).get("structuredContent") or {}).get("results") or []
    for hit in hits:
        where = f"{hit['project']}/{hit['path']}"
        if where in leaked:
            continue
        leaked.add(where)
        read = server.request("resources/read", {"uri": f"code://{where}"})
        tally.note(f"{name}: served {where}: {str(read)[:120]}")
        tally.leaks += 1


def run_hostile_repos(seconds: float, seed: int, work: Path, min_mixtures: int = 0) -> RepoTally:
    """The known vectors, then random mixtures for ``seconds`` (at least ``min_mixtures`` of
    them however long they take: a loaded machine still tries some)."""
    tally = RepoTally()
    rng = random.Random(seed)
    work.mkdir(parents=True, exist_ok=True)
    scene = hg.make_scene(work / "scene", above_root=True)
    server = Server(work, scene.allowed)
    fixed = list(hg.EXECUTION_VECTORS + hg.ESCAPE_VECTORS)
    leaked: set[str] = set()  # project/path of every outside file served
    started = time.monotonic()
    try:
        first_mixture = len(fixed)
        while tally.cases < MAX_CASES and (fixed or time.monotonic() - started < seconds
                                           or tally.cases - first_mixture < min_mixtures):
            d = scene.allowed / f"c{tally.cases}"
            if fixed:
                build = fixed.pop(0)
                name, case = build.__name__, build(scene, d)
            else:
                name, case = _mixture(scene, d, rng)
            tally.cases += 1
            tally.vectors[name.split(" ")[0]] = tally.vectors.get(name.split(" ")[0], 0) + 1
            try:
                _check(server, scene, tally, name, case, f"p{tally.cases}", rng, leaked)
            except TimeoutError as exc:
                tally.hangs += 1
                tally.note(f"{name}: {exc}")
                server.stop()
                server = Server(work, scene.allowed)
            except EOFError as exc:
                tally.crashes += 1
                tally.note(f"{name}: {exc}")
                server = Server(work, scene.allowed)
    finally:
        server.stop()
    tally.tracebacks = (work / "stderr.log").read_bytes().count(b"Traceback")
    return tally


def report(tally: RepoTally, seconds: float, seed: int) -> str:
    rows = [("cases", tally.cases), ("completed / refused", f"{tally.completed} / {tally.refused}"),
            ("executions (must be 0)", tally.executions), ("leaks (must be 0)", tally.leaks),
            ("misses (must be 0)", tally.misses), ("-32603 answers", tally.internal),
            ("hangs / crashes", f"{tally.hangs} / {tally.crashes}"), ("tracebacks on stderr", tally.tracebacks)]
    out = [f"hostile repositories: seed {seed}, {seconds:g} s", "| | codesearch |", "|---|---|"]
    out += [f"| {name} | {value} |" for name, value in rows]
    out += [f"  {example}" for example in tally.examples]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--min-mixtures", type=int, default=0, help="random mixtures to try however long they take")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="write the tally as JSON here")
    parser.add_argument("--work", type=Path, help="build the scene here (default: a temporary directory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcpkit-fuzz-repos-") as tmp:
        tally = run_hostile_repos(args.seconds, args.seed, args.work or Path(tmp), args.min_mixtures)
    print(report(tally, args.seconds, args.seed))
    if args.out:
        args.out.write_text(json.dumps(asdict(tally), indent=2))
    return 1 if tally.failed() else 0


if __name__ == "__main__":
    sys.exit(main())

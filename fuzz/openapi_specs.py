"""The hostile-spec leg of the campaign: `mcpkit serve --plugin openapi` started again and again
with a good spec and hostile ones (plugins/openapi/tests/hostile_specs.py) at random sizes.

Each start must answer `initialize` within START_TIMEOUT with its peak RSS under PEAK_RSS_MIB,
log at most one line per spec (exactly one when it refuses it, naming the spec), log no
traceback, and keep serving the good spec; every `get_operation` of a hostile API that was
served must answer within ANSWER_BYTES. A breach counts as "unbounded" (a start or an answer
too slow or too large) or "lost" (the good spec not served, a refusal not logged once).
"""

from __future__ import annotations

import json
import queue
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from common import BIN, INIT, ROOT, Tally, server_env, stop_server, well_formed

sys.path.insert(0, str(ROOT / "plugins" / "openapi" / "tests"))
import hostile_specs as hs  # noqa: E402

START_TIMEOUT = 60.0
ANSWER_TIMEOUT = 20.0
ANSWER_BYTES = 200 * 1024  # the record twice (structured and text) at the 64 KB default, with room
PEAK_RSS_MIB = 300
GOOD = ROOT / "plugins" / "openapi" / "tests" / "fixtures" / "petstore-3.0.yaml"


class SpecTally(Tally):
    def __init__(self) -> None:
        super().__init__("openapi-specs")
        self.unbounded = 0
        self.lost = 0

    def failed(self) -> bool:
        return super().failed() or bool(self.unbounded or self.lost)


# kind -> (extension, a builder drawing its sizes from rng, operation ids to describe if served)
def _kinds() -> dict[str, tuple[str, Callable[[random.Random], str], list[str]]]:
    return {
        "nested-flow": (".yaml", lambda r: hs.nested_flow_yaml(r.choice([101, 1000, r.randint(90, 60_000)]),
                                                                   r.choice("[{")), []),
        "nested-block": (".yaml", lambda r: hs.nested_block_yaml(r.randint(50, 600)), []),
        "nested-json": (".json", lambda r: hs.nested_json(r.randint(50, 60_000)), []),
        "alias-bomb": (".yaml", lambda r: hs.alias_bomb_yaml(r.randint(3, 12), r.randint(2, 12)), ["bomb"]),
        "recursive-alias": (".yaml", lambda r: hs.recursive_alias_yaml(), ["loop"]),
        "huge-integer": (".yaml", lambda r: hs.huge_integer_yaml(r.randint(4_000, 20_000)), []),
        "ref-fanout": (".json", lambda r: hs.ref_fanout_json(r.randint(2, 7), r.randint(2, 60), r.randint(1, 20),
                                                             r.choice(["properties", "allOf", "anyOf", "oneOf"])),
                       ["op0", "op1"]),
        "path-item-fanout": (".yaml", lambda r: hs.path_item_fanout_yaml(r.randint(1, 500), r.randint(2, 6),
                                                                         r.randint(2, 50)), ["POST /0", "POST /1"]),
        "sibling-merge": (".json", lambda r: hs.sibling_merge_json(r.randint(10, 20_000), r.randint(1, 500)), ["m0"]),
        "shared-text": (".yaml", lambda r: hs.shared_text_yaml(r.randint(10, 1_000_000), r.randint(1, 1000)),
                        ["GET /s0"]),
    }


class _Server:
    def __init__(self, config: Path, work: Path, env: dict[str, str]) -> None:
        self.stderr_path = work / "stderr.log"
        self.stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen([str(BIN / "mcpkit"), "serve", "--plugin", "openapi", "--config", str(config)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     cwd=work, env=env)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.n = 0

    def _pump(self) -> None:
        for line in self.proc.stdout or []:
            self.lines.put(line)
        self.lines.put(None)

    def notify(self, method: str) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            pass

    def call(self, method: str, params: dict[str, Any], timeout: float) -> tuple[Any, int] | None:
        """(answer, bytes), or None when the process ended or did not answer in time."""
        self.n += 1
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method,
                                              "params": params}).encode() + b"\n")
            self.proc.stdin.flush()
            line = self.lines.get(timeout=timeout)
        except (OSError, queue.Empty):
            return None
        if line is None:
            return None
        try:
            return json.loads(line), len(line)
        except ValueError:
            return line, len(line)

    def stop(self) -> str:
        stop_server(self.proc, self.stderr)
        return self.stderr_path.read_text("utf-8", errors="replace")


def _round(rng: random.Random, kinds: dict[str, Any], work: Path, env: dict[str, str], tally: SpecTally) -> None:
    work.mkdir(parents=True, exist_ok=True)
    chosen = rng.sample(sorted(kinds), 3)
    specs = {"pets": str(GOOD)}
    for kind in chosen:
        ext, build, _ = kinds[kind]
        path = work / f"{kind}{ext}"
        path.write_text(build(rng), "utf-8")
        specs[kind] = str(path)
    config = work / "mcpkit.toml"
    config.write_text(hs.config_toml(specs, work / "cache"))
    tally.sent += len(chosen)
    server = _Server(config, work, env)
    started = time.monotonic()
    answer = server.call("initialize", INIT, START_TIMEOUT)
    seconds = time.monotonic() - started
    tally.statuses["slowest start (s)"] = max(tally.statuses.get("slowest start (s)", 0), round(seconds, 1))
    if answer is None:
        if server.proc.poll() is None:
            tally.hangs += 1
            tally.note(f"no initialize answer within {START_TIMEOUT} s with {chosen}")
        else:
            tally.crashes += 1
            tally.note(f"exit {server.proc.returncode} at start-up with {chosen}")
        server.stop()
        return
    peak = 0.0
    for row in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if row.startswith("VmHWM:"):
            peak = int(row.split()[1]) / 1024
    tally.statuses["peak RSS (MiB)"] = max(tally.statuses.get("peak RSS (MiB)", 0), round(peak))
    if peak > PEAK_RSS_MIB:
        tally.unbounded += 1
        tally.note(f"peak RSS {peak:.0f} MiB with {chosen}")
    server.notify("notifications/initialized")
    _check_answers(server, chosen, kinds, tally)
    log = server.stop()
    tally.tracebacks += log.count("Traceback")
    for kind in chosen:
        lines = log.count(f"skipping spec {specs[kind]}:")
        tally.statuses["refused"] = tally.statuses.get("refused", 0) + (lines == 1)
        if lines > 1:
            tally.lost += 1
            tally.note(f"{kind}: {lines} log lines for one spec")


def _check_answers(server: _Server, chosen: list[str], kinds: dict[str, Any], tally: SpecTally) -> None:
    found = server.call("tools/call", {"name": "search_ids", "arguments": {"query": "delete a pet"}}, ANSWER_TIMEOUT)
    ops = (found[0].get("result", {}).get("structuredContent", {}).get("operations", [])
           if found and isinstance(found[0], dict) else [])
    # the id has the "pets:" prefix unless every hostile spec was refused
    if not ops or ops[0].get("operation_id") not in ("pets:DELETE /pets/{petId}", "DELETE /pets/{petId}"):
        tally.lost += 1
        tally.note(f"the good spec was not served beside {chosen}: {str(found)[:200]}")
    for kind in chosen:
        for op_id in kinds[kind][2]:
            got = server.call("tools/call", {"name": "get_operation", "arguments": {"operation_id": f"{kind}:{op_id}"}},
                              ANSWER_TIMEOUT)
            if got is None:
                tally.hangs += 1
                tally.note(f"get_operation {kind}:{op_id} unanswered")
                return
            answer, size = got
            if not isinstance(answer, dict):
                tally.non_json += 1
                continue
            if not well_formed(answer):
                tally.malformed += 1
            if isinstance(answer.get("error"), dict) and answer["error"].get("code") == -32603:
                tally.internal += 1
            if not answer.get("result", {}).get("isError"):
                tally.statuses["served"] = tally.statuses.get("served", 0) + 1
            tally.statuses["largest answer (KB)"] = max(tally.statuses.get("largest answer (KB)", 0), size // 1024)
            if size > ANSWER_BYTES:
                tally.unbounded += 1
                tally.note(f"get_operation {kind}:{op_id} answered {size} bytes")


def run_specs(seconds: float, seed: int, work: Path) -> Tally:
    """Rounds of three hostile specs and the good one, for ``seconds`` (at least one round)."""
    tally = SpecTally()
    rng = random.Random(seed)
    kinds = _kinds()
    env = server_env(work)
    started = time.monotonic()
    n = 0
    while n == 0 or time.monotonic() - started < seconds:
        _round(rng, kinds, work / f"round-{n}", env, tally)
        n += 1
    tally.statuses.update(rounds=n, unbounded=tally.unbounded, lost=tally.lost)
    return tally

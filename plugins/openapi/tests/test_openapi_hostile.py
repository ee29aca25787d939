"""Hostile specs (issue 22, item 5): each is refused with one line naming its bound, or served
with answers of bounded size, and start-up stays bounded in time and memory.

Specs are loaded in a child process with a cap on its address space, so that a regression
(a crash in the C YAML loader, a schema expanding to gigabytes) fails the test instead of
taking pytest or the machine with it.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mcpkit_openapi.bounds import DEFAULT_MAX_OPERATION_BYTES
from mcpkit_openapi.engine import Settings, SettingsError

sys.path.insert(0, str(Path(__file__).parent))  # the suite imports in importlib mode
import hostile_specs as hs  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
MEMORY_CAP = 3 << 30  # address space of the child processes
# what one operation's record may come to: its share plus the capped texts and markers
RECORD_BOUND = DEFAULT_MAX_OPERATION_BYTES + 16 * 1024

_CHILD = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))
from mcpkit_openapi.engine import Engine, Settings
config = {"specs": json.loads(sys.argv[1]), "cache_dir": sys.argv[3], **json.loads(sys.argv[2])}
started = time.perf_counter()
catalog = Engine(Settings.from_config(config)).catalog
records = [json.dumps(op.to_dict(), default=str) for op in catalog.operations]
print(json.dumps({"seconds": time.perf_counter() - started, "errors": catalog.errors,
                  "apis": [api.name for api in catalog.apis],
                  "sizes": [len(r) for r in records], "notes": [op.to_dict().get("note") for op in catalog.operations],
                  "truncated": sum('"truncated": true' in r for r in records)}))
"""


def _write(tmp: Path, name: str, **kw: Any) -> Path:
    ext, build = hs.BUILDERS[name]
    path = tmp / f"{name}{ext}"
    path.write_text(build(**kw), "utf-8")
    return path


def _load_in_child(spec: Path, tmp: Path, config: dict[str, Any] | None = None, timeout: float = 120,
                   also: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The plugin's engine over a spec file (and ``also`` these), with an index cache, in a
    capped child process."""
    code = _CHILD.replace("CAP", str(MEMORY_CAP))
    specs = json.dumps([str(p) for p in (spec, *also)])
    try:
        proc = subprocess.run([sys.executable, "-c", code, specs, json.dumps(config or {}), str(tmp / "cache")],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"loading {spec.name} took more than {timeout} s")
    assert proc.returncode == 0, f"loading {spec.name} killed the process ({proc.returncode}): {proc.stderr[-1500:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-1500:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize(("name", "reason"), [
    ("nested-flow", "nests deeper than 100 levels (the limit is max_nesting = 100)"),
    ("nested-block", "nests deeper than 100 levels (the limit is max_nesting = 100)"),
    ("nested-json", "nests deeper than 100 levels (the limit is max_nesting = 100)"),
    ("alias-bomb", "expands to more than 1,000,000 nodes through YAML aliases"),
    ("recursive-alias", "has a YAML alias *a inside the node it names"),
    ("huge-integer", "invalid YAML: Exceeds the limit (4300 digits)"),
    ("path-item-fanout", "expands to more than 16 MiB once its $refs are resolved (the limit is max_expanded_mb = 16)"),
])
def test_a_spec_over_a_bound_is_refused_with_one_line(tmp_path: Path, name: str, reason: str) -> None:
    spec = _write(tmp_path, name)
    out = _load_in_child(spec, tmp_path)
    assert len(out["errors"]) == 1, out["errors"]
    assert out["errors"][0].startswith(f"{spec}: ") and reason in out["errors"][0]
    assert "\n" not in out["errors"][0]
    assert out["seconds"] < 30


def test_nesting_is_counted_in_keys_and_flow_mappings_too(tmp_path: Path) -> None:
    deep_map = tmp_path / "map.yaml"
    deep_map.write_text(hs.nested_flow_yaml(50_000, opener="{"))
    deep_key = tmp_path / "key.yaml"  # nesting inside a complex mapping key
    deep_key.write_text(hs.ENVELOPE + "paths: {}\n? " + "[" * 50_000 + "]" * 50_000 + "\n: 1\n")
    for spec in (deep_map, deep_key):
        assert "max_nesting = 100" in _load_in_child(spec, tmp_path)["errors"][0]
    # a spec just within the bound loads
    ok = tmp_path / "ok.yaml"
    ok.write_text(hs.nested_flow_yaml(97))
    assert _load_in_child(ok, tmp_path)["errors"] == []


def test_a_ref_fanout_is_served_with_every_record_bounded(tmp_path: Path) -> None:
    spec = _write(tmp_path, "ref-fanout")  # 10 KB, each body 40 ** 5 nodes when expanded
    assert spec.stat().st_size < 11_000
    out = _load_in_child(spec, tmp_path)
    assert out["errors"] == [] and len(out["sizes"]) == 10
    assert max(out["sizes"]) < RECORD_BOUND
    assert out["truncated"] == 10
    assert all(note.startswith("To stay within 64 KB, some of its schemas are cut") for note in out["notes"])
    assert out["seconds"] < 20


@pytest.mark.parametrize("keyword", ["allOf", "anyOf", "oneOf"])
def test_fanout_through_combinators_is_bounded_too(tmp_path: Path, keyword: str) -> None:
    spec = tmp_path / "combined.json"
    spec.write_text(hs.ref_fanout_json(levels=8, width=10, operations=3, keyword=keyword))
    out = _load_in_child(spec, tmp_path)
    assert out["errors"] == [] and max(out["sizes"]) < RECORD_BOUND and out["seconds"] < 20


def test_a_long_text_shared_by_thousands_of_paths_is_read_once_each_cheaply(tmp_path: Path) -> None:
    spec = _write(tmp_path, "shared-text")  # 4 MB: 2 MB of text shared by 3,000 operations
    out = _load_in_child(spec, tmp_path)
    assert out["errors"] == [] and len(out["sizes"]) == 3000
    assert max(out["sizes"]) < 4000  # description cut at 1,500 characters, summary at 300
    assert out["seconds"] < 20


def test_expansion_bounds_are_settings(tmp_path: Path) -> None:
    spec = _write(tmp_path, "ref-fanout", levels=3, width=6, operations=4)
    assert _load_in_child(spec, tmp_path)["notes"] == [""] * 4  # 6 ** 3 fits 64 KB
    small = _load_in_child(spec, tmp_path, {"max_operation_kb": 4})  # same cache, other bounds
    assert max(small["sizes"]) < 4096 + 2048 and all("within 4 KB" in n for n in small["notes"])
    refused = _load_in_child(spec, tmp_path, {"max_expanded_mb": 0.02})
    assert "the limit is max_expanded_mb = 0.02" in refused["errors"][0]
    deep = _write(tmp_path, "nested-block", levels=30)
    assert "max_nesting = 20" in _load_in_child(deep, tmp_path, {"max_nesting": 20})["errors"][0]
    assert _load_in_child(deep, tmp_path)["errors"] == []
    for key, bad in (("max_nesting", 0), ("max_nesting", 2.5), ("max_operation_kb", -1), ("max_expanded_mb", True)):
        with pytest.raises(SettingsError, match=key):
            Settings.from_config({key: bad})


def test_a_refused_spec_leaves_the_others_served(tmp_path: Path) -> None:
    bomb = _write(tmp_path, "alias-bomb")
    out = _load_in_child(bomb, tmp_path, also=(FIXTURES / "petstore-3.0.yaml",))
    assert len(out["errors"]) == 1 and out["errors"][0].startswith(str(bomb))
    assert out["apis"] == ["pet-store"] and out["sizes"]


# --- end to end: a real server over stdio with every hostile spec and a good one ---------------

class _Stdio:
    def __init__(self, args: list[str], cwd: Path) -> None:
        mcpkit = Path(sys.executable).with_name("mcpkit")  # installed beside the interpreter
        env = {**os.environ, "MCPKIT_DATA_DIR": str(cwd / "data")}
        self.proc = subprocess.Popen([str(mcpkit), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=cwd, env=env)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr: list[bytes] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr or []), daemon=True).start()
        self.n = 0

    def _pump(self) -> None:
        for line in self.proc.stdout or []:
            self.lines.put(line)
        self.lines.put(None)

    def call(self, method: str, params: dict[str, Any], timeout: float) -> tuple[dict[str, Any], int]:
        """The answer to one request and its size in bytes."""
        self.n += 1
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}).encode() + b"\n")
        self.proc.stdin.flush()
        line = self.lines.get(timeout=timeout)
        assert line is not None, b"".join(self.stderr).decode(errors="replace")[-3000:]
        return json.loads(line), len(line)

    def peak_rss_mib(self) -> float:
        for row in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if row.startswith("VmHWM:"):
                return int(row.split()[1]) / 1024
        return 0.0

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


REFUSED = ["nested-flow", "nested-json", "alias-bomb", "recursive-alias", "huge-integer", "path-item-fanout"]
SERVED = ["ref-fanout", "sibling-merge", "shared-text"]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak RSS from /proc")
def test_server_starts_with_hostile_specs_and_serves_the_good_one(tmp_path: Path) -> None:
    specs = {name: _write(tmp_path, name) for name in REFUSED + SERVED}
    shutil.copy(FIXTURES / "petstore-3.0.yaml", tmp_path / "petstore.yaml")
    config = tmp_path / "mcpkit.toml"
    config.write_text(hs.config_toml({**{name: str(path) for name, path in specs.items()}, "pets": "petstore.yaml"},
                                     tmp_path / "cache"))
    server = _Stdio(["serve", "--plugin", "openapi", "--config", str(config)], tmp_path)
    try:
        started = time.monotonic()
        init, _ = server.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                             "clientInfo": {"name": "t", "version": "0"}}, timeout=120)
        start_seconds = time.monotonic() - started
        assert "result" in init
        found, _ = server.call("tools/call", {"name": "search_ids", "arguments": {"query": "delete a pet", "limit": 3}}, 30)
        ops = found["result"]["structuredContent"]["operations"]
        assert ops[0]["operation_id"] == "pets:DELETE /pets/{petId}"
        sizes = {}
        for op_id in ("ref-fanout:op0", "sibling-merge:m0", "shared-text:GET /s0", "pets:DELETE /pets/{petId}"):
            answer, sizes[op_id] = server.call("tools/call", {"name": "get_operation", "arguments": {"operation_id": op_id}}, 30)
            assert not answer["result"].get("isError"), answer
        fanout, _ = server.call("tools/call", {"name": "get_operation", "arguments": {"operation_id": "ref-fanout:op3"}}, 30)
        details = fanout["result"]["structuredContent"]
        assert details["request_body"]["schema"]["properties"]["p0"]["truncated"] is True
        assert "some of its schemas are cut" in details["note"], details
        peak = server.peak_rss_mib()
    finally:
        server.close()
    log = b"".join(server.stderr).decode(errors="replace")
    assert "Traceback" not in log, log[-3000:]
    for name, path in specs.items():
        lines = [row for row in log.splitlines() if f"skipping spec {path}:" in row]
        assert len(lines) == (1 if name in REFUSED else 0), (name, lines)
    # an answer holds the record twice (structured content and its text): 2 x 80 KB at most
    assert max(sizes.values()) < 2 * RECORD_BOUND + 4096, sizes
    # generous bounds for a shared 2-CPU machine; before, start-up crashed or ran out of memory
    assert start_seconds < 60, start_seconds
    assert peak < 512, peak
    print(f"start-up {start_seconds:.1f} s, peak RSS {peak:.0f} MiB, answers {sizes}")

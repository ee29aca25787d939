"""The console's bookkeeping, directly (issue 25): what it keeps of requests is bounded and right
(percentiles, the recent ring, the tools' windows, the sessions), viewers that fall behind are
dropped, and the workers' snapshots merge into one view and go stale when a worker is gone."""

from __future__ import annotations

import os
import time
from pathlib import Path

import trio

from mcpkit.protocol.jsonrpc import Answer, ErrorObject
from mcpkit.server.observe import RequestRecord
from mcpkit.transports.http.console import observer as obs_mod
from mcpkit.transports.http.console.observer import ConsoleObserver, percentile
from mcpkit.transports.http.console.share import STALE_S, WorkerShare, merge


def run(observer: ConsoleObserver, tool: str, answer: Answer | None, *, client: str = "c") -> RequestRecord:
    rec = RequestRecord("tools/call", 1, "http", None, "2026-07-28", target=tool, client_name=client)
    with observer.request(rec):
        assert any(e["target"] == obs_mod._short(tool) for e in observer.inflight.values())
        rec.finish(answer)
    observer.ended(rec)
    return rec


def test_percentiles_are_nearest_rank() -> None:
    ordered = [float(n) for n in range(1, 101)]
    assert percentile(ordered, 0.5) == 50 and percentile(ordered, 0.99) == 99 and percentile(ordered, 1.0) == 100
    assert percentile([7.0], 0.5) == percentile([7.0], 0.99) == 7


def test_what_it_keeps_is_bounded_and_counts_outcomes() -> None:
    o = ConsoleObserver()
    ok = Answer(1, {"content": []})
    for _ in range(obs_mod.WINDOW + 10):
        run(o, "a", ok)
    run(o, "a", Answer(1, {"content": [], "isError": True}))
    run(o, "a", Answer(1, None, ErrorObject(-32602, "bad")))
    run(o, "a", None)  # cancelled
    assert not o.inflight
    assert len(o.recent) == obs_mod.RECENT and len(o.windows["a"]) == obs_mod.WINDOW
    assert o.counts["a"] == [obs_mod.WINDOW + 13, 3]
    assert [e["outcome"] for e in list(o.recent)[-4:]] == ["ok", "tool_error", "-32602", "cancelled"]
    for n in range(obs_mod.MAX_TOOLS + 5):  # names a client invents do not grow the table past its cap
        run(o, f"t{n}", ok)
    assert len(o.counts) == obs_mod.MAX_TOOLS + 1 and o.counts[obs_mod.OTHER][0] == 6
    run(o, "x" * 10_000, ok, client="y" * 10_000)
    assert len(o.recent[-1]["target"]) == len(o.recent[-1]["client"]) == obs_mod.MAX_TEXT + 1


def test_sessions_and_streams() -> None:
    o = ConsoleObserver()
    for n in range(obs_mod.MAX_SESSIONS + 3):
        o.session_opened("http", f"s{n}")
    o.session_opened("stdio", None)
    assert o.open_sessions == obs_mod.MAX_SESSIONS + 4 and len(o.sessions) == obs_mod.MAX_SESSIONS
    o.session_closed("http", "s0", 1.0)
    o.session_closed("stdio", None, 1.0)
    assert o.open_sessions == obs_mod.MAX_SESSIONS + 2 and "s0" not in o.sessions
    o.stream_opened("http")
    o.stream_opened("http")
    o.stream_closed("http")
    o.rejected("auth", "http")
    snap = o.snapshot()
    assert snap["streams"] == 1 and snap["rejected"] == {"auth": 1}


async def test_a_viewer_that_falls_behind_is_dropped_and_the_others_are_not() -> None:
    o = ConsoleObserver()
    with o.watch() as slow, o.watch() as quick:
        for n in range(obs_mod.VIEWER_QUEUE + 1):
            o.push("call", {"n": n})
            await quick.receive.receive()
        assert slow.dropped and slow.scope.cancel_called and not quick.dropped
        assert o.viewers == {quick} and o.dropped_viewers == 1
        o.push("call", {"n": "last"})
        assert b'"last"' in await quick.receive.receive()
        with trio.move_on_after(1):
            frames = [f async for f in slow.receive]  # what was queued, then the end
        assert len(frames) == obs_mod.VIEWER_QUEUE


def test_snapshots_merge_and_a_gone_worker_goes_stale(tmp_path: Path) -> None:
    a, b = ConsoleObserver(), ConsoleObserver()
    b.pid = a.pid + 1
    for seconds, o in ((0.001, a), (0.003, b), (0.002, b)):
        rec = run(o, "t", Answer(1, {"content": []}))
        o.windows["t"][-1] = seconds
        o.recent[-1]["duration_ms"] = seconds * 1000
    b.session_opened("http", "sid")
    rec = RequestRecord("tools/call", 2, "http", None, "2026-07-28", target="slow")
    with b.request(rec):
        view = merge([a.snapshot(), b.snapshot()])
    assert view["workers"] == [a.pid, a.pid + 1] and view["inflight_count"] == 1
    assert view["inflight"][0]["worker"] == a.pid + 1
    assert view["tools"]["t"] == {"calls": 3, "errors": 0, "window": 3, "p50_ms": 2.0, "p99_ms": 3.0}
    assert view["open_sessions"] == 1 and [s["id"] for s in view["sessions"]] == ["sid"]
    assert len(view["recent"]) == 3

    mine, other = WorkerShare(str(tmp_path)), WorkerShare(str(tmp_path))
    other.pid, other.mine = a.pid + 1, tmp_path / f"{a.pid + 1}.json"
    mine.write(a.snapshot())
    other.write(b.snapshot())
    (seen,) = mine.others()
    assert seen["worker"] == a.pid + 1 and seen["open_sessions"] == 1
    old = time.time() - STALE_S - 1
    os.utime(other.mine, (old, old))
    assert mine.others() == [] and not other.mine.exists()  # a worker that stopped writing is left out
    mine.remove()
    assert list(tmp_path.iterdir()) == []

"""The HTTP server's FIFO gate (mcpkit/transports/http/h1/_gate.py) on trio's own mock clock:
places taken in arrival order, a long request retired after ``hold``, a waiter that gives up
leaves no place behind; and a real server with the gate on answers everything."""

from __future__ import annotations

import trio
import trio.testing

from mcpkit.transports.http.h1._gate import Gate

from .http_helpers import HttpServer


def _run(main) -> None:  # type: ignore[no-untyped-def]
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_places_go_in_arrival_order_and_long_holders_retire() -> None:
    entered: list[tuple[int, float]] = []

    async def main() -> None:
        gate = Gate(2, hold=0.05)

        async def request(n: int, seconds: float) -> None:
            await gate.enter(n)
            entered.append((n, round(trio.current_time(), 3)))
            await trio.sleep(seconds)
            gate.leave(n)

        async with trio.open_nursery() as nursery:
            for n, seconds in enumerate([1.0, 1.0, 0.01, 0.01, 0.01, 0.01]):
                nursery.start_soon(request, n, seconds)
                await trio.sleep(0.001)

    _run(main)
    # 0 and 1 at once; 2 when 0 has held its place for 0.05 s, 3 when 1 has; 4 and 5 in turn as 2 and 3 finish
    assert entered == [(0, 0.0), (1, 0.001), (2, 0.05), (3, 0.051), (4, 0.06), (5, 0.061)]


def test_a_waiter_that_gives_up_leaves_no_place_taken() -> None:
    async def main() -> None:
        gate = Gate(1, hold=10)
        await gate.enter("a")
        with trio.move_on_after(0.1) as scope:
            await gate.enter("b")
        assert scope.cancelled_caught and list(gate.holders) == ["a"]
        gate.leave("a")
        with trio.fail_after(0.01):
            await gate.enter("c")  # free at once
        assert list(gate.holders) == ["c"] and gate._handed == 0 and not gate._queue

    _run(main)


def test_a_server_with_the_gate_answers_every_request() -> None:
    with HttpServer("--plugin", "hello", env={"MCPKIT_ACTIVE_REQUESTS": "1", "MCPKIT_ACTIVE_REQUEST_HOLD_S": "0.05"}) as server:
        sid = server.initialize()
        for _ in range(3):
            status, _, reply = server.rpc("tools/call", {"name": "greet", "arguments": {"name": "gate"}}, session=sid)
            assert status == 200 and "gate" in reply["result"]["content"][0]["text"], reply

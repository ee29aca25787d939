"""The change hub (mcpkit/server/changes.py) driven directly: who gets which change, in what order,
and what a slow or failing receiver costs (nothing but its own hints)."""

from __future__ import annotations

from typing import Any

import trio

from mcpkit.protocol import jsonrpc
from mcpkit.server.changes import LISTENER_BACKLOG, RELAY_BACKLOG, ChangeHub


async def test_listeners_get_every_change_relays_only_this_processs() -> None:
    hub = ChangeHub()
    relayed: list[Any] = []

    async def relay(event: str, arg: Any) -> None:
        relayed.append((event, arg))

    with hub.listen() as events, hub.relaying(relay):
        await hub.announce("tools/list_changed", None)
        hub.arrived("prompts/list_changed", None)  # another process's: not relayed again
        got = [events.receive_nowait(), events.receive_nowait()]
    assert got == [("tools/list_changed", None), ("prompts/list_changed", None)]
    assert relayed == [("tools/list_changed", None)]


async def test_announce_returns_only_after_every_relay_has_the_change() -> None:
    hub = ChangeHub()
    done: list[str] = []

    async def slow(event: str, arg: Any) -> None:
        await trio.sleep(0.05)
        done.append(event)

    with hub.relaying(slow):
        await hub.announce("resources/updated", "file:///a")
        assert done == ["resources/updated"]


async def test_a_failing_relay_costs_only_that_hint() -> None:
    hub = ChangeHub()
    later: list[str] = []

    async def away(event: str, arg: Any) -> None:
        raise jsonrpc.ProtocolError(jsonrpc.SERVER_BUSY, "shared state away")

    async def fine(event: str, arg: Any) -> None:
        later.append(event)

    with hub.relaying(away), hub.relaying(fine):
        await hub.announce("tools/list_changed", None)
    assert later == ["tools/list_changed"]


async def test_published_changes_reach_relays_through_the_pump_in_order() -> None:
    hub = ChangeHub()
    relayed: list[Any] = []

    async def relay(event: str, arg: Any) -> None:
        relayed.append(arg)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.pump)
        with hub.relaying(relay):
            for i in range(5):
                hub.publish("task", i)
            await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert relayed == [0, 1, 2, 3, 4]


async def test_without_relays_nothing_queues() -> None:
    hub = ChangeHub()
    for i in range(RELAY_BACKLOG * 2):
        hub.publish("task", i)
    assert hub.dropped == 0


async def test_a_listener_that_stops_reading_loses_hints_and_blocks_nobody() -> None:
    hub = ChangeHub()
    with hub.listen() as stuck, hub.listen() as reader:
        for i in range(LISTENER_BACKLOG + 10):
            await hub.announce("tools/list_changed", i)
            assert reader.receive_nowait()[1] == i
        assert hub.dropped == 10
        assert stuck.receive_nowait()[1] == 0


async def test_close_ends_listeners_now_and_later() -> None:
    hub = ChangeHub()
    with hub.listen() as events:
        hub.close()
        with trio.fail_after(1):
            assert [e async for e in events] == []
    with hub.listen() as late:
        with trio.fail_after(1):
            assert [e async for e in late] == []

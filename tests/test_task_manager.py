"""The task manager (mcpkit/server/tasks/manager.py) driven directly, on a real SQLite file or the
in-memory store, with a tool body the test steers: when a call stays a plain answer and when
it becomes a task, who may see a task, cancellation on both sides of escalation, input
mid-flight, the progress save interval, the caps, shutdown, orphans and expiry.

Where time matters the tests run on trio's MockClock (``autojump_clock`` jumps whenever every
task waits; ``mock_clock`` moves only when the test says). SQLite calls run in worker threads,
which an autojumping clock does not wait for, so the SQLite tests use the real clock or the
manual one.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import msgspec
import pytest
import trio
import trio.testing

from mcpkit.protocol import jsonrpc
from mcpkit.protocol.connection import RequestReceived, ServerConnection
from mcpkit.protocol.jsonrpc import ProtocolError
from mcpkit.server.auth import Principal
from mcpkit.server.context import check_response
from mcpkit.server.settings import Settings
from mcpkit.server.tasks.manager import PURGE_EVERY_S, SAVE_PROGRESS_EVERY_S, SWEEP_S, TaskManager, TaskRun
from mcpkit.server.tasks.model import TaskRecord, new_task_id, this_runner
from mcpkit.server.tasks.sqlite_store import SqliteTaskStore
from mcpkit.server.tasks.store import MemoryTaskStore, TaskStore

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}
ASK_NAME = {"name": ("elicitation/create", {"message": "Your name?", "requestedSchema": {"type": "object"}})}


def request(owner: str = "alice", *, tasks: bool = True, principal: Principal | None = None) -> RequestReceived:
    """A stateless-era tools/call as a connection owned by ``owner`` decodes it."""
    conn = ServerConnection(server_info={"name": "t", "version": "0"}, capabilities={}, owner=owner)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": TASKS if tasks else {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "job", "arguments": {}, "_meta": meta}}
    (req,) = conn.receive(json.dumps(body).encode(), stateless=True)
    assert isinstance(req, RequestReceived)
    req.principal = principal
    return req


class Job:
    """A tool body the test steers: it may make itself a task at once (``ctx.start_task()``),
    then waits for ``release`` and answers; it records whether it was cancelled."""

    def __init__(self, manager: TaskManager, *, escalate: bool = False, seconds: float | None = None) -> None:
        self.manager = manager
        self.escalate = escalate
        self.seconds = seconds  # sleep this long instead of waiting for release
        self.run: TaskRun | None = None
        self.release = trio.Event()
        self.cancelled = False
        self.answers: dict[str, Any] | None = None

    def bind(self, run: TaskRun) -> None:
        self.run = run

    async def __call__(self) -> dict[str, Any]:
        assert self.run is not None, "bind() runs before the call starts"
        try:
            if self.escalate:
                await self.manager.escalate(self.run)
            if self.seconds is not None:
                await trio.sleep(self.seconds)
            else:
                await self.release.wait()
        except trio.Cancelled:
            self.cancelled = True
            raise
        return {"content": [{"type": "text", "text": "done"}], "isError": False}


class Harness:
    """One manager and what it told listeners (``notifications/tasks``), in order."""

    def __init__(self, make_store: Callable[[], TaskStore], **settings: Any) -> None:
        self.notes: list[dict[str, Any]] = []
        self.manager = TaskManager(Settings(**{"task_escalate_ms": 100, **settings}), make_store, self._publish)

    def _publish(self, event: str, arg: Any) -> None:
        assert event == "task"
        self.notes.append(arg[2])

    async def start(self, job: Job, req: RequestReceived | None = None, timeout: float = 60.0) -> dict[str, Any]:
        return await self.manager.start(req or request(), "job", job.bind, job, trio.current_time() + timeout)

    async def started_task(self, job: Job, req: RequestReceived | None = None) -> str:
        """Start ``job`` as a request would and return its task id once it is one."""
        created = await self.start(job, req)
        assert created["resultType"] == "task", created
        return created["taskId"]


def on_disk(path: Path, task_id: str) -> TaskRecord | None:
    """The task as the SQLite file holds it right now (read without yielding to trio)."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        row = db.execute("SELECT record FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    return None if row is None else msgspec.json.decode(row[0], type=TaskRecord)


def status_on_disk(path: Path, task_id: str) -> str | None:
    rec = on_disk(path, task_id)
    return None if rec is None else rec.status


async def eventually(check: Callable[[], bool], seconds: float = 5.0) -> None:
    """Wait (in real time: worker threads do the SQLite work) until ``check()`` holds."""
    end = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < end, "the condition never held"
        await trio.to_thread.run_sync(time.sleep, 0.01)


def record(owner: str = "alice", *, runner: str | None = None, age_s: float = 0.0, ttl_ms: int | None = 3_600_000,
           status: str = "working") -> TaskRecord:
    created = time.time() - age_s
    return TaskRecord(task_id=new_task_id(), owner=owner, tool="job", created_at=created, updated_at=created,
                      ttl_ms=ttl_ms, poll_interval_ms=1000, runner=runner or this_runner(), status=status)


def dead_runner() -> str:
    """The runner name of a process of this host that has ended."""
    child = subprocess.Popen(["true"])
    child.wait()
    return f"{socket.gethostname()}:{child.pid}:1"


async def refused(coro: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        await coro
    return caught.value


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], TaskStore]:
    if request.param == "memory":
        store = MemoryTaskStore()
        return lambda: store
    return lambda: SqliteTaskStore(tmp_path / "tasks.sqlite3")


# -- a plain answer, or a task --------------------------------------------------------------------

async def test_a_call_is_a_plain_answer_within_task_escalate_ms_and_a_task_past_it(autojump_clock: Any) -> None:
    h = Harness(MemoryTaskStore)
    async with h.manager.serving():
        quick, slow = Job(h.manager, seconds=0.05), Job(h.manager, seconds=5)
        t0 = trio.current_time()
        assert await h.start(quick) == {"content": [{"type": "text", "text": "done"}], "isError": False}
        assert trio.current_time() - t0 == pytest.approx(0.05)
        assert h.manager.running == {} and h.notes == []  # never a task: nothing stored, nobody told
        assert await h.manager.store.load(quick.run.record.task_id) is None  # type: ignore[union-attr]

        t0 = trio.current_time()
        created = await h.start(slow)
        assert trio.current_time() - t0 == pytest.approx(0.1)  # task_escalate_ms
        assert created["resultType"] == "task" and created["status"] == "working" and created["ttlMs"] == 3_600_000
        task_id = created["taskId"]
        assert (await h.manager.get(request(), task_id))["status"] == "working"
        await trio.sleep(5)
        done = await h.manager.get(request(), task_id)
        assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "done"
        assert [n["status"] for n in h.notes] == ["working", "completed"]
        assert h.manager.running == {}


async def test_a_task_is_on_disk_before_anyone_is_told_its_id(tmp_path: Path) -> None:
    path = tmp_path / "tasks.sqlite3"
    h = Harness(lambda: SqliteTaskStore(path), task_escalate_ms=20)
    told: list[TaskRecord | None] = []
    h.manager.publish = lambda event, arg: told.append(on_disk(path, arg[1]))  # what a listener could fetch then
    async with h.manager.serving():
        job = Job(h.manager)
        created = await h.start(job)
        task_id = created["taskId"]
        assert on_disk(path, task_id) is not None, "the client got a task id the store does not have"
        assert told and told[0] is not None and told[0].status == "working"
        job.release.set()
        await eventually(lambda: status_on_disk(path, task_id) == "completed")
    assert on_disk(path, task_id).result["content"][0]["text"] == "done"  # type: ignore[union-attr]


async def test_start_task_makes_it_a_task_at_once(mock_clock: Any) -> None:
    """ctx.start_task(): no waiting for task_escalate_ms (the clock never moves here)."""
    h = Harness(MemoryTaskStore, task_escalate_ms=10_000)
    async with h.manager.serving():
        job = Job(h.manager, escalate=True)
        task_id = await h.started_task(job)
        assert trio.current_time() == 0
        assert (await h.manager.get(request(), task_id))["status"] == "working"
        job.release.set()


# -- who may see a task ---------------------------------------------------------------------------

async def test_another_owner_sees_an_unknown_task(make_store: Callable[[], TaskStore]) -> None:
    h = Harness(make_store)
    async with h.manager.serving():
        job = Job(h.manager, escalate=True)
        task_id = await h.started_task(job)
        bob = request("bob")
        for attempt in (h.manager.get(bob, task_id), h.manager.cancel(bob, task_id),
                        h.manager.update(bob, task_id, {}, check_response)):
            err = await refused(attempt)
            assert err.code == jsonrpc.INVALID_PARAMS and "Unknown task" in err.message
        assert job.run is not None and not job.run.scope.cancel_called  # bob's cancel did nothing
        err = await refused(h.manager.get(request(tasks=False), task_id))
        assert err.code == jsonrpc.MISSING_CLIENT_CAPABILITY  # without the extension there are no tasks
        assert (await h.manager.get(request(), task_id))["status"] == "working"
        job.release.set()


async def test_a_principals_task_is_theirs_not_the_anonymous_connections() -> None:
    h = Harness(MemoryTaskStore)
    ada = Principal(subject="ada", issuer="https://idp.example")
    async with h.manager.serving():
        job = Job(h.manager, escalate=True)
        task_id = await h.started_task(job, request("anonymous", principal=ada))
        assert (await h.manager.get(request("anonymous", principal=ada), task_id))["status"] == "working"
        assert (await refused(h.manager.get(request("anonymous"), task_id))).code == jsonrpc.INVALID_PARAMS
        job.release.set()


# -- cancellation ---------------------------------------------------------------------------------

async def test_a_request_cancelled_before_escalation_cancels_the_call_and_leaves_no_task(autojump_clock: Any) -> None:
    h = Harness(MemoryTaskStore)
    async with h.manager.serving():
        job = Job(h.manager)
        with trio.move_on_after(0.05) as gone:  # the client went away at 50 ms; escalation is at 100
            await h.start(job)
        assert gone.cancelled_caught
        await trio.testing.wait_all_tasks_blocked()
        assert job.cancelled and h.manager.running == {} and h.notes == []
        assert await h.manager.store.count_live() == 0


async def test_tasks_cancel_after_escalation_cancels_the_tool_once(make_store: Callable[[], TaskStore]) -> None:
    h = Harness(make_store)
    async with h.manager.serving():
        job = Job(h.manager, escalate=True)
        task_id = await h.started_task(job)
        assert await h.manager.cancel(request(), task_id) == {}
        with trio.fail_after(5):
            while (await h.manager.get(request(), task_id))["status"] != "cancelled":
                await trio.sleep(0.01)
        assert job.cancelled
        assert await h.manager.cancel(request(), task_id) == {}  # idempotent on a finished task
        stored = await h.manager.store.load(task_id)
        assert stored is not None and stored.status == "cancelled" and stored.status_message == "Cancelled at the client's request"
        assert h.notes[-1]["status"] == "cancelled" and h.manager.running == {}


async def test_cancel_and_input_through_another_process_reach_the_runner(tmp_path: Path) -> None:
    """Two managers on one SQLite file (as two workers): the one that does not run the task
    leaves the cancel request and the input in the store; the runner's sweep takes them.

    The other one answers requests only: it runs no sweep of its own, which in this process
    would take the signals as its own (both have this process's runner name)."""
    path = tmp_path / "tasks.sqlite3"
    runner, other = Harness(lambda: SqliteTaskStore(path)), Harness(lambda: SqliteTaskStore(path))
    other.manager.store = SqliteTaskStore(path)
    await other.manager.store.open()
    async with runner.manager.serving():
        asking = Job(runner.manager, escalate=True)

        async def ask() -> dict[str, Any]:
            assert asking.run is not None
            await runner.manager.escalate(asking.run)
            asking.answers = await runner.manager.ask(asking.run, ASK_NAME)
            return {"content": [{"type": "text", "text": asking.answers["name"]["content"]["name"]}], "isError": False}

        created = await runner.manager.start(request(), "job", asking.bind, ask, trio.current_time() + 60)
        ask_id = created["taskId"]
        await eventually(lambda: status_on_disk(path, ask_id) == "input_required")
        key = next(iter((await other.manager.get(request(), ask_id))["inputRequests"]))
        await other.manager.update(request(), ask_id, {key: {"action": "accept", "content": {"name": "Ada"}}}, check_response)

        waiting = Job(runner.manager, escalate=True)
        wait_id = await runner.started_task(waiting)
        await other.manager.cancel(request(), wait_id)
        with trio.fail_after(SWEEP_S * 5):
            while status_on_disk(path, ask_id) != "completed" or status_on_disk(path, wait_id) != "cancelled":
                await trio.sleep(0.05)
        assert on_disk(path, ask_id).result["content"][0]["text"] == "Ada"  # type: ignore[union-attr]
        assert waiting.cancelled
    await other.manager.store.close()


# -- input mid-flight -----------------------------------------------------------------------------

async def test_input_required_waits_for_tasks_update_then_resumes(make_store: Callable[[], TaskStore]) -> None:
    h = Harness(make_store)
    async with h.manager.serving():
        job = Job(h.manager)

        async def ask() -> dict[str, Any]:
            assert job.run is not None
            await h.manager.escalate(job.run)
            job.answers = await h.manager.ask(job.run, ASK_NAME)
            return {"content": [{"type": "text", "text": "thanks"}], "isError": False}

        created = await h.manager.start(request(), "job", job.bind, ask, trio.current_time() + 60)
        task_id = created["taskId"]
        with trio.fail_after(5):
            while (task := await h.manager.get(request(), task_id))["status"] != "input_required":
                await trio.sleep(0.01)
        (key,) = task["inputRequests"]
        assert key != "name" and key.startswith("name-")  # minted: unique within the task
        assert task["inputRequests"][key] == {"method": "elicitation/create", "params": ASK_NAME["name"][1]}
        assert (await h.manager.store.load(task_id)).status == "input_required"  # type: ignore[union-attr]
        bad = await refused(h.manager.update(request(), task_id, {key: {"no": "action"}}, check_response))
        assert bad.code == jsonrpc.INVALID_PARAMS and job.answers is None
        await h.manager.update(request(), task_id, {"stranger": {"action": "decline"}}, check_response)  # ignored
        await trio.sleep(0.05)
        assert job.answers is None
        answer = {"action": "accept", "content": {"name": "Ada"}}
        assert await h.manager.update(request(), task_id, {key: answer}, check_response) == {}
        with trio.fail_after(5):
            while (await h.manager.get(request(), task_id))["status"] != "completed":
                await trio.sleep(0.01)
        assert job.answers == {"name": answer}  # under the tool's own key
        assert [n["status"] for n in h.notes] == ["working", "input_required", "working", "completed"]


# -- progress -------------------------------------------------------------------------------------

async def test_progress_is_saved_at_most_once_per_interval_and_the_last_one_is_not_lost(mock_clock: Any, tmp_path: Path) -> None:
    path = tmp_path / "tasks.sqlite3"
    h = Harness(lambda: SqliteTaskStore(path))
    async with h.manager.serving():
        job = Job(h.manager, escalate=True)
        task_id = await h.started_task(job)
        assert job.run is not None
        for i in range(50):  # a tool reporting in a tight loop, all within one interval
            await h.manager.progress(job.run, f"step {i}")
        assert on_disk(path, task_id).status_message == "step 0"  # type: ignore[union-attr]
        assert [n.get("statusMessage") for n in h.notes] == [None, "step 0"]  # created, then one save
        assert (await h.manager.get(request(), task_id))["statusMessage"] == "step 49"  # this process knows more
        mock_clock.jump(SAVE_PROGRESS_EVERY_S)
        await eventually(lambda: getattr(on_disk(path, task_id), "status_message", None) == "step 49")
        assert [n.get("statusMessage") for n in h.notes] == [None, "step 0", "step 49"]
        await h.manager.progress(job.run, "step 50")  # saved at 1 s: the next one waits again
        assert on_disk(path, task_id).status_message == "step 49"  # type: ignore[union-attr]
        job.release.set()
        await eventually(lambda: status_on_disk(path, task_id) == "completed")
        mock_clock.jump(SAVE_PROGRESS_EVERY_S)  # a save still pending must not undo the final state
        await trio.testing.wait_all_tasks_blocked()
        await trio.to_thread.run_sync(time.sleep, 0.05)
        assert status_on_disk(path, task_id) == "completed"
        assert h.notes[-1]["status"] == "completed"


# -- limits ---------------------------------------------------------------------------------------

async def test_live_tasks_are_capped_per_principal_and_in_all() -> None:
    h = Harness(MemoryTaskStore, max_tasks_per_principal=2, max_live_tasks=3)
    async with h.manager.serving():
        jobs = [Job(h.manager, escalate=True) for _ in range(3)]
        for job in jobs[:2]:
            await h.started_task(job)
        third = await refused(h.start(Job(h.manager, escalate=True)))
        assert third.code == jsonrpc.SERVER_BUSY and "max_tasks_per_principal" in third.message
        await h.started_task(jobs[2], request("bob"))
        full = await refused(h.start(Job(h.manager, escalate=True), request("carol")))
        assert full.code == jsonrpc.SERVER_BUSY and "max_live_tasks" in full.message
        jobs[0].release.set()  # one of alice's finishes: room for her again
        with trio.fail_after(5):
            while await h.manager.store.count_live("alice") == 2:
                await trio.sleep(0.01)
        again = Job(h.manager, escalate=True)
        await h.started_task(again)
        for job in (jobs[1], jobs[2], again):
            job.release.set()


# -- the end of a process, and of others ---------------------------------------------------------

async def test_shutdown_fails_the_tasks_still_running(tmp_path: Path) -> None:
    path = tmp_path / "tasks.sqlite3"
    h = Harness(lambda: SqliteTaskStore(path))
    async with h.manager.serving():
        working = Job(h.manager, escalate=True)
        working_id = await h.started_task(working)
        asking = Job(h.manager)

        async def ask() -> dict[str, Any]:
            assert asking.run is not None
            await h.manager.escalate(asking.run)
            await h.manager.ask(asking.run, ASK_NAME)
            return {"content": [], "isError": False}

        asking_id = (await h.manager.start(request(), "job", asking.bind, ask, trio.current_time() + 60))["taskId"]
        await eventually(lambda: status_on_disk(path, asking_id) == "input_required")
        finished = Job(h.manager, escalate=True)
        finished_id = await h.started_task(finished)
        finished.release.set()
        await eventually(lambda: status_on_disk(path, finished_id) == "completed")
    assert working.cancelled
    for task_id in (working_id, asking_id):
        task = on_disk(path, task_id)
        assert task is not None and task.status == "failed" and task.input_requests is None
        assert task.error == {"code": jsonrpc.INTERNAL_ERROR, "message": "The server shut down while the task was running"}
    assert status_on_disk(path, finished_id) == "completed"


async def test_the_tasks_of_a_dead_process_are_failed_at_start_and_when_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "tasks.sqlite3"
    dead, far = dead_runner(), "another-host.invalid:1:1"
    orphan, remote, done = record(runner=dead), record(runner=far), record(runner=dead, status="completed")
    store = SqliteTaskStore(path)
    await store.open()
    for rec in (orphan, remote, done):
        await store.create(rec)
    await store.close()
    h = Harness(lambda: SqliteTaskStore(path))
    async with h.manager.serving():
        failed = on_disk(path, orphan.task_id)
        assert failed is not None and failed.status == "failed" and "stopped before it finished" in failed.error["message"]
        assert status_on_disk(path, remote.task_id) == "working"  # its host may still run it
        assert status_on_disk(path, done.task_id) == "completed"
        late = record(runner=dead)  # appears after start (a process that died just now)
        await h.manager.store.create(late)
        assert (await h.manager.get(request(), late.task_id))["status"] == "failed"


async def test_expired_tasks_are_unknown_then_purged_on_the_purge_interval(autojump_clock: Any) -> None:
    h = Harness(MemoryTaskStore)
    async with h.manager.serving():
        store = h.manager.store
        old, forever, fresh = record(age_s=7200), record(age_s=7200, ttl_ms=None), record(age_s=60)
        for rec in (old, forever, fresh):
            await store.create(rec)
        err = await refused(h.manager.get(request(), old.task_id))
        assert err.code == jsonrpc.INVALID_PARAMS and "Unknown task" in err.message
        await trio.sleep(SWEEP_S * 1.5)  # the first sweep purges
        assert await store.load(old.task_id) is None
        assert await store.load(forever.task_id) is not None and await store.load(fresh.task_id) is not None
        later = record(age_s=7200)
        await store.create(later)
        await trio.sleep(SWEEP_S * 3)  # sweeps, but purging waits for its own interval
        assert await store.load(later.task_id) is not None
        await trio.sleep(PURGE_EVERY_S)
        assert await store.load(later.task_id) is None

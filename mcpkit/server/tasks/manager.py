"""Running tools as tasks: creation, input mid-flight, cancellation, status for tasks/get.

A ``tools/call`` of a task-capable tool, from a client that declared the extension, starts the
tool in the manager's nursery while the request waits. The request answers with the tool's own
result if it finishes within ``task_escalate_ms`` (or asks for input first, multi round-trip
style), and otherwise — or as soon as the tool calls ``ctx.start_task()`` — the task is made
durable in the store and the request answers with a CreateTaskResult while the tool runs on.
From then on progress becomes the task's ``statusMessage``, input requests park it in
``input_required`` until ``tasks/update`` answers them, and ``tasks/cancel`` cancels its scope.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable

import msgspec
import trio

from ...protocol import jsonrpc
from ...protocol.jsonrpc import ProtocolError
from ...protocol.types import TASKS_EXTENSION
from ..errors import MissingCapability
from .model import TERMINAL, TaskRecord, new_task_id, this_runner
from .store import MemoryTaskStore, TaskStore

if TYPE_CHECKING:
    from ...protocol.connection import RequestReceived
    from ..settings import Settings

log = logging.getLogger("mcpkit.tasks")
SWEEP_S = 1.0
PURGE_EVERY_S = 30.0
SAVE_PROGRESS_EVERY_S = 1.0


def declared(caps: dict[str, Any]) -> bool:
    """Did the request's client capabilities declare the tasks extension?"""
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def missing_extension() -> ProtocolError:
    return ProtocolError(jsonrpc.MISSING_CLIENT_CAPABILITY, f"Missing required client capability: the {TASKS_EXTENSION} extension",
                         {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})


def unknown_task(task_id: str) -> ProtocolError:
    return ProtocolError(jsonrpc.INVALID_PARAMS, f"Unknown task: {task_id!r} (never created, expired, or not yours)")


class TaskRun:
    """A task this process runs (or, before escalation, a tool call that may become one)."""

    def __init__(self, record: TaskRecord) -> None:
        self.record = record
        self.scope = trio.CancelScope()
        self.decided = trio.Event()  # the request may answer now
        self.created = trio.Event()  # the record is durable, or the store refused it (``refused``)
        self.refused: Exception | None = None  # why the store would not take it: there is no task
        self.escalating = False
        self.outcome: Any = None  # before escalation: the sync result, or the exception to raise
        self.answers: dict[str, Any] = {}
        self.keys = 0
        self.waiters: list[tuple[set[str], trio.Event]] = []  # (keys, set when all are answered)
        self.saved_at = -math.inf  # when progress was last saved (trio's clock)
        self.save_due = False  # a progress message waits to be saved when the interval is up

    def mint_key(self, key: str) -> str:
        self.keys += 1
        return f"{key}-{self.keys}"


class TaskManager:
    def __init__(self, settings: "Settings", make_store: Callable[[], TaskStore], publish: Callable[[str, Any], None]) -> None:
        self.settings = settings
        self._make_store = make_store
        self.store: TaskStore = MemoryTaskStore()  # until serving() picks the configured one
        self.publish = publish
        self.running: dict[str, TaskRun] = {}
        self._nursery: trio.Nursery | None = None

    # -- lifetime ---------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator["TaskManager"]:
        self.store = self._make_store()
        await self.store.open()
        try:
            try:
                await self._fail_orphans()
            except ProtocolError:  # shared state away at start (logged by the link): the sweep retries
                pass
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._sweep)
                try:
                    yield self
                finally:
                    await self._shut_down()
                    nursery.cancel_scope.cancel()
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True):
                await self.store.close()

    async def _shut_down(self) -> None:
        with trio.CancelScope(shield=True):
            for run in list(self.running.values()):
                run.scope.cancel()
                if run.created.is_set() and not run.record.terminal:
                    self._finish(run, "failed", error={"code": jsonrpc.INTERNAL_ERROR,
                                                       "message": "The server shut down while the task was running"})
                    with trio.move_on_after(2):
                        await self.store.save(run.record)

    async def _sweep(self) -> None:
        last_purge = -math.inf
        while True:
            await trio.sleep(SWEEP_S)
            try:
                for task_id, cancel, inputs in await self.store.signals(this_runner()):
                    run = self.running.get(task_id)
                    if run is not None:
                        if inputs:
                            self._deliver(run, inputs)
                        if cancel:
                            run.scope.cancel()
                if trio.current_time() - last_purge >= PURGE_EVERY_S:
                    last_purge = trio.current_time()
                    purged = await self.store.purge(time.time())
                    if purged:
                        log.info("purged %d expired tasks", purged)
                    await self._fail_orphans()
            except ProtocolError as exc:  # shared state away: the link logs the outage once
                log.debug("task sweep skipped: %s", exc.message)
            except Exception as exc:  # a store hiccup must not end the sweeper
                log.warning("task sweep failed: %s: %s", type(exc).__name__, exc)

    async def _fail_orphans(self) -> None:
        """Tasks whose process died (a crash, kill -9) are failed, never left working for ever."""
        for runner in await self.store.live_runners():
            if runner != this_runner() and await self.store.runner_gone(runner):
                n = await self.store.fail_tasks_of(runner, "The server process running this task stopped before it finished",
                                                   time.time())
                if n:
                    log.warning("marked %d tasks of a stopped process (%s) failed", n, runner)

    # -- who may see what --------------------------------------------------------------------------
    @staticmethod
    def owner_of(req: "RequestReceived") -> str:
        principal = req.principal
        if principal is not None:
            return str(getattr(principal, "key", None) or principal)
        return req.owner

    async def _visible(self, req: "RequestReceived", task_id: str) -> tuple[TaskRecord, TaskRun | None]:
        if not declared(req.client_capabilities):
            raise missing_extension()
        run = self.running.get(task_id)
        record = run.record if run is not None and run.created.is_set() else await self.store.load(task_id)
        if record is None or record.owner != self.owner_of(req) or record.expires_at() <= time.time():
            raise unknown_task(task_id)
        if run is None and not record.terminal and record.runner != this_runner() and await self.store.runner_gone(record.runner):
            await self._fail_orphans()
            record = await self.store.load(task_id) or record
        return record, run

    # -- tools/call ---------------------------------------------------------------------------------
    async def start(self, req: "RequestReceived", tool: str, bind: Callable[[TaskRun], None],
                    invoke: Callable[[], Awaitable[dict[str, Any]]], deadline: float) -> dict[str, Any]:
        """Run ``invoke`` (the tool call) as a task candidate; answer with its result, or with a
        CreateTaskResult once it escalates. ``bind`` hands the run to the call's Context."""
        assert self._nursery is not None, "the task manager is not serving"
        owner = self.owner_of(req)
        await self._check_caps(owner)
        now = time.time()
        s = self.settings
        record = TaskRecord(task_id=new_task_id(), owner=owner, tool=tool, created_at=now, updated_at=now,
                            ttl_ms=s.task_ttl_ms, poll_interval_ms=s.task_poll_interval_ms, runner=this_runner())
        run = TaskRun(record)
        bind(run)
        self.running[record.task_id] = run
        self._nursery.start_soon(self._execute, run, invoke, deadline)
        try:
            with trio.move_on_after(s.task_escalate_ms / 1000):
                await run.decided.wait()
        except trio.Cancelled:  # the request went away before the task existed: so does the call
            if not run.escalating:
                run.scope.cancel()
            raise
        if run.decided.is_set() and not run.escalating:
            if isinstance(run.outcome, BaseException):
                raise run.outcome
            return run.outcome
        await self.escalate(run)
        return {"resultType": "task", **run.record.envelope()}

    async def _check_caps(self, owner: str) -> None:
        s = self.settings
        if await self.store.count_live(owner) >= s.max_tasks_per_principal:
            raise ProtocolError(jsonrpc.SERVER_BUSY, f"Too many live tasks: {s.max_tasks_per_principal} of yours are still running "
                                "(max_tasks_per_principal); cancel some or wait for them", {"limit": s.max_tasks_per_principal})
        if await self.store.count_live() >= s.max_live_tasks:
            raise ProtocolError(jsonrpc.SERVER_BUSY, f"Too many live tasks on this server ({s.max_live_tasks}, max_live_tasks); "
                                "retry later", {"limit": s.max_live_tasks})

    async def escalate(self, run: TaskRun) -> None:
        """Make the run a task: durable in the store before anyone is told its id."""
        if run.escalating:
            await run.created.wait()
            if run.refused is not None:
                raise run.refused
            return
        run.escalating = True
        run.decided.set()
        try:
            with trio.CancelScope(shield=True):
                await self.store.create(run.record)
        except Exception as exc:  # the store refused it (shared state away): the call fails, no task exists
            run.refused = exc
            run.scope.cancel()
            self.running.pop(run.record.task_id, None)
            run.created.set()  # whoever waits for the record: there will be none
            raise
        run.created.set()
        self._notify(run)

    async def _execute(self, run: TaskRun, invoke: Callable[[], Awaitable[dict[str, Any]]], deadline: float) -> None:
        outcome: Any
        try:
            with run.scope:
                with trio.CancelScope(deadline=deadline):  # the tool's timeout (call_tool answers it)
                    outcome = await invoke()
        except ProtocolError as exc:
            outcome = exc
        except MissingCapability as exc:
            outcome = ProtocolError(jsonrpc.MISSING_CLIENT_CAPABILITY, str(exc), {"requiredCapabilities": exc.required})
        except Exception as exc:  # call_tool turns tool failures into results; this is a bug
            log.exception("task %s: internal error", run.record.task_id)
            outcome = ProtocolError(jsonrpc.INTERNAL_ERROR, f"Internal error: {type(exc).__name__}")
        if run.scope.cancelled_caught:
            outcome = None
        if not run.escalating:  # answered by the request itself
            self.running.pop(run.record.task_id, None)
            if outcome is None:
                outcome = ProtocolError(jsonrpc.REQUEST_TIMEOUT, "Request cancelled")
            run.outcome = outcome
            run.decided.set()
            return
        with trio.CancelScope(shield=True):
            await run.created.wait()
            if run.refused is not None:
                return  # never a task: its call was answered with the store's error
            if run.record.terminal:
                pass  # the server shut down meanwhile: the task is failed already, not cancelled by the client
            elif outcome is None:
                self._finish(run, "cancelled", message="Cancelled at the client's request")
            elif isinstance(outcome, ProtocolError):
                self._finish(run, "failed", error=msgspec.to_builtins(outcome.to_object()))
            else:
                self._finish(run, "completed", result=msgspec.to_builtins(outcome))
            try:
                await self.store.save(run.record)
            except Exception as exc:
                log.error("task %s: could not store its final state: %s", run.record.task_id, exc)
            self.running.pop(run.record.task_id, None)

    def _finish(self, run: TaskRun, status: str, *, result: Any = None, error: Any = None, message: str | None = None) -> None:
        rec = run.record
        rec.status = status  # type: ignore[assignment]
        rec.updated_at = time.time()
        rec.result, rec.error, rec.input_requests = result, error, None
        if message is not None:
            rec.status_message = message
        elif error is not None:
            rec.status_message = error.get("message")
        self._notify(run)

    def _notify(self, run: TaskRun) -> None:
        self.publish("task", (run.record.owner, run.record.task_id, run.record.detailed()))

    # -- from inside a task (the Context) ----------------------------------------------------------
    async def progress(self, run: TaskRun, message: str) -> None:
        """The task's statusMessage: saved (and told to listeners) at most once per
        SAVE_PROGRESS_EVERY_S; one that comes sooner is saved when the interval is up, so the
        latest message is never lost however long the tool is silent after it."""
        rec = run.record
        rec.status_message = message
        rec.updated_at = time.time()
        if trio.current_time() - run.saved_at >= SAVE_PROGRESS_EVERY_S:
            await self._save_progress(run)
        elif not run.save_due and self._nursery is not None:
            run.save_due = True
            self._nursery.start_soon(self._save_progress_later, run)

    async def _save_progress(self, run: TaskRun) -> None:
        run.saved_at = trio.current_time()
        self._notify(run)
        await self.store.save(run.record)

    async def _save_progress_later(self, run: TaskRun) -> None:
        await trio.sleep_until(run.saved_at + SAVE_PROGRESS_EVERY_S)
        run.save_due = False
        if run.record.status != "working" or self.running.get(run.record.task_id) is not run:
            return  # finished, or waiting for input (saved then, and again when it resumes)
        try:
            await self._save_progress(run)
        except Exception as exc:  # the next progress or the final state is saved all the same
            log.warning("task %s: could not save its progress: %s: %s", run.record.task_id, type(exc).__name__, exc)

    async def ask(self, run: TaskRun, requests: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, Any]:
        """Park the task in input_required with these requests until tasks/update answers all."""
        await run.created.wait()
        minted = {run.mint_key(key): key for key in requests}
        rec = run.record
        pending = dict(rec.input_requests or {})
        for mk, key in minted.items():
            method, params = requests[key]
            pending[mk] = {"method": method, "params": params}
        rec.input_requests, rec.status, rec.updated_at = pending, "input_required", time.time()
        self._notify(run)
        answered = trio.Event()
        waiter = (set(minted), answered)
        run.waiters.append(waiter)
        try:
            await self.store.save(rec)
            if not waiter[0] <= run.answers.keys():
                await answered.wait()
        finally:
            run.waiters.remove(waiter)
        out = {key: run.answers.pop(mk) for mk, key in minted.items()}
        if not rec.input_requests:
            rec.status, rec.updated_at = "working", time.time()
            rec.input_requests = None
            self._notify(run)
            await self.store.save(rec)
        return out

    def _deliver(self, run: TaskRun, responses: dict[str, Any]) -> None:
        """Take the answers to outstanding requests; others are ignored (spec: SHOULD)."""
        outstanding = run.record.input_requests or {}
        took = False
        for key, value in responses.items():
            if key in outstanding and key not in run.answers:
                run.answers[key] = value
                del outstanding[key]
                took = True
        if took:
            run.record.input_requests = outstanding
            for keys, answered in run.waiters:
                if keys <= run.answers.keys():
                    answered.set()

    # -- tasks/get, tasks/update, tasks/cancel ----------------------------------------------------
    async def get(self, req: "RequestReceived", task_id: str) -> dict[str, Any]:
        record, _ = await self._visible(req, task_id)
        return record.detailed()

    async def update(self, req: "RequestReceived", task_id: str, responses: dict[str, Any],
                     check: Callable[[str, str, Any], Any]) -> dict[str, Any]:
        record, run = await self._visible(req, task_id)
        outstanding = record.input_requests or {}
        for key, value in responses.items():
            if key in outstanding:
                check(key, outstanding[key].get("method", ""), value)  # a malformed answer is -32602
        if record.terminal:
            return {}
        if run is not None:
            self._deliver(run, responses)
        else:
            await self.store.deliver_inputs(task_id, responses)
        return {}

    async def cancel(self, req: "RequestReceived", task_id: str) -> dict[str, Any]:
        record, run = await self._visible(req, task_id)
        if record.terminal:
            return {}  # idempotent
        if run is not None:
            run.scope.cancel()
        else:
            await self.store.request_cancel(task_id)
        return {}

    async def subscribable(self, req: "RequestReceived", task_ids: list[str]) -> list[str]:
        """The ids of ``task_ids`` this requester may follow."""
        out = []
        for tid in task_ids:
            with contextlib.suppress(ProtocolError):
                await self._visible(req, tid)
                out.append(tid)
        return out


__all__ = ["TASKS_EXTENSION", "TaskManager", "TaskRun", "TERMINAL", "declared", "missing_extension"]

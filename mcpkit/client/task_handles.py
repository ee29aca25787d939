"""Task handles (the ``io.modelcontextprotocol/tasks`` extension): follow a tool call the server
answered with a task, answer what it asks along the way, cancel it, or pick it up again by id."""

from __future__ import annotations

import math
from typing import Any, Awaitable, Callable, Iterable, Protocol

import trio

from .errors import BadResponse, McpError, from_rpc
from .results import CallResult



class TaskClient(Protocol):
    """What a task handle needs of the client that made it."""

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any: ...

    async def answer_requests(self, requests: Any, *, skip: Iterable[str] = (), kind: str = "input request") -> dict[str, Any]: ...

TERMINAL = frozenset({"completed", "failed", "cancelled"})
#: called with the task's latest state (a DetailedTask) each time it is polled
StatusCallback = Callable[[dict[str, Any]], Awaitable[None] | None]


class TaskCancelled(McpError):
    code = "E109"
    user_message = "The task was cancelled."


class TaskHandle:
    """A task on the server: ``await handle.wait()`` for its result, ``await handle.cancel()``."""

    def __init__(self, client: TaskClient, task_id: str, state: dict[str, Any] | None = None) -> None:
        self.client = client
        self.task_id = task_id
        self.state: dict[str, Any] = dict(state or {"taskId": task_id})
        self._answered: set[str] = set()  # inputRequests keys already answered (polls repeat them)

    def __repr__(self) -> str:
        return f"<TaskHandle {self.task_id} {self.status}>"

    @property
    def status(self) -> str | None:
        return self.state.get("status")

    @property
    def status_message(self) -> str | None:
        return self.state.get("statusMessage")

    @property
    def poll_interval(self) -> float:
        ms = self.state.get("pollIntervalMs")
        interval = ms / 1000 if isinstance(ms, (int, float)) and ms > 0 else 1.0
        return max(self.client.settings.min_poll_interval, interval)

    async def refresh(self) -> dict[str, Any]:
        """tasks/get: the task's current state (also kept in ``state``)."""
        result = await self.client.request("tasks/get", {"taskId": self.task_id})
        if not isinstance(result, dict) or result.get("taskId") != self.task_id:
            raise BadResponse(f"tasks/get answered for another task than {self.task_id!r}")
        self.state = result
        return result

    async def cancel(self) -> None:
        """tasks/cancel: ask the server to stop the task (it may still finish first)."""
        await self.client.request("tasks/cancel", {"taskId": self.task_id})

    async def wait(self, *, on_status: StatusCallback | None = None, timeout: float | None = None) -> CallResult:
        """Poll until the task ends; answer its input requests with the client's callbacks.

        Returns the tool's result; a failed task raises the JSON-RPC error it failed with, a
        cancelled one :class:`TaskCancelled`.
        """
        with trio.fail_after(math.inf if timeout is None else timeout):
            while True:
                state = await self.refresh()
                if on_status is not None:
                    maybe = on_status(state)
                    if maybe is not None:
                        await maybe
                status = state.get("status")
                if status in TERMINAL:
                    return self._outcome(state)
                if status == "input_required":
                    await self._answer(state.get("inputRequests"))
                    continue
                await trio.sleep(self.poll_interval)

    async def _answer(self, requests: Any) -> None:
        responses = await self.client.answer_requests(requests, skip=self._answered, kind="task input request")
        if responses:
            await self.client.request("tasks/update", {"taskId": self.task_id, "inputResponses": responses})
            self._answered.update(responses)
        else:
            await trio.sleep(self.poll_interval)  # answered already: wait for the server to move on

    @staticmethod
    def _outcome(state: dict[str, Any]) -> CallResult:
        status = state.get("status")
        if status == "completed":
            result = state.get("result")
            if not isinstance(result, dict):
                raise BadResponse("a completed task carried no result")
            return CallResult.from_raw(result)
        if status == "failed":
            err = state.get("error") if isinstance(state.get("error"), dict) else {}
            raise from_rpc(err.get("code"), err.get("message") or state.get("statusMessage"), err.get("data"))
        raise TaskCancelled(state.get("statusMessage") or None)


def is_task(result: Any) -> bool:
    return isinstance(result, dict) and result.get("resultType") == "task" and isinstance(result.get("taskId"), str)

"""Tasks in Redis (``state = "redis://..."``): any process on any host answers tasks/get, and
cancel requests and input responses reach the process running the task.

Keys (under the configured prefix):
  task:<id>                 the record (JSON), expiring with the task's TTL
  tasks:live                sorted set of live task ids, scored by expiry (for purging)
  tasks:meta                hash id -> "owner\\n runner" (to clean the indexes after expiry)
  tasks:owner:<owner>       set of the owner's live task ids (the per-owner cap)
  tasks:runner:<runner>     set of a process's live task ids; tasks:runners lists the processes
  hb:<runner>               a process's heartbeat (15 s); a runner without one is gone
  sig:<runner>:cancel       set of task ids to cancel
  sig:<runner>:in / in:<id> task ids with input responses waiting / the responses (hash)
"""

from __future__ import annotations

import math
import time
from typing import Any

import msgspec

from ..redis_link import RedisLink
from .model import TERMINAL, TaskRecord, runner_alive

HEARTBEAT_S = 15
_encode = msgspec.json.Encoder().encode
_decode_record = msgspec.json.Decoder(TaskRecord).decode
_TAKE_SIGNALS = """
local cancel = redis.call('SMEMBERS', KEYS[1])
redis.call('DEL', KEYS[1])
local ids = redis.call('SMEMBERS', KEYS[2])
redis.call('DEL', KEYS[2])
local inputs = {}
for _, id in ipairs(ids) do
  local key = ARGV[1] .. id
  table.insert(inputs, id)
  table.insert(inputs, redis.call('HGETALL', key))
  redis.call('DEL', key)
end
return {cancel, inputs}
"""


class RedisTaskStore:
    def __init__(self, link: RedisLink) -> None:
        self.link = link
        self.k = link.key

    async def open(self) -> None:
        return None  # the link is opened by the app

    async def close(self) -> None:
        return None

    def _index(self, pipe: Any, record: TaskRecord) -> None:
        k, tid = self.k, record.task_id
        if record.terminal:
            pipe.zrem(k("tasks", "live"), [tid])
            pipe.srem(k("tasks", "owner", record.owner), [tid])
            pipe.srem(k("tasks", "runner", record.runner), [tid])
        else:
            pipe.zadd(k("tasks", "live"), {tid: _score(record)})
            pipe.sadd(k("tasks", "owner", record.owner), [tid])
            pipe.sadd(k("tasks", "runner", record.runner), [tid])
            pipe.sadd(k("tasks", "runners"), [record.runner])
            pipe.hset(k("tasks", "meta"), {tid: f"{record.owner}\n{record.runner}"})

    async def _write(self, record: TaskRecord) -> None:
        expires = record.expires_at()

        async def run(r: Any) -> None:
            async with r.pipeline(transaction=True) as pipe:
                if math.isinf(expires):
                    pipe.set(self.k("task", record.task_id), _encode(record))
                else:
                    pipe.set(self.k("task", record.task_id), _encode(record), pxat=max(1, int(expires * 1000)))
                self._index(pipe, record)

        await self.link.call(run)

    async def create(self, record: TaskRecord) -> None:
        await self._write(record)

    async def save(self, record: TaskRecord) -> None:
        await self._write(record)

    async def load(self, task_id: str) -> TaskRecord | None:
        raw = await self.link.call(lambda r: r.get(self.k("task", task_id)))
        return None if raw is None else _decode_record(raw)

    async def count_live(self, owner: str | None = None) -> int:
        if owner is None:
            return int(await self.link.call(lambda r: r.zcard(self.k("tasks", "live"))))
        return int(await self.link.call(lambda r: r.scard(self.k("tasks", "owner", owner))))

    async def _runner_of(self, task_id: str) -> str | None:
        meta = await self.link.call(lambda r: r.hget(self.k("tasks", "meta"), task_id))
        return None if meta is None else bytes(meta).decode().split("\n", 1)[1]

    async def request_cancel(self, task_id: str) -> None:
        runner = await self._runner_of(task_id)
        if runner is not None:
            await self.link.call(lambda r: r.sadd(self.k("sig", runner, "cancel"), [task_id]))

    async def deliver_inputs(self, task_id: str, responses: dict[str, Any]) -> None:
        runner = await self._runner_of(task_id)
        if runner is None or not responses:
            return

        async def run(r: Any) -> None:
            async with r.pipeline(transaction=True) as pipe:
                pipe.hset(self.k("sig", runner, "in", task_id), {key: _encode(v) for key, v in responses.items()})
                pipe.sadd(self.k("sig", runner, "in"), [task_id])

        await self.link.call(run)

    async def signals(self, runner: str) -> list[tuple[str, bool, dict[str, Any]]]:
        """Take what other processes left for ``runner``; also keeps its heartbeat."""
        keys = [self.k("sig", runner, "cancel"), self.k("sig", runner, "in")]
        prefix = self.k("sig", runner, "in", "")

        async def run(r: Any) -> Any:
            await r.set(self.k("hb", runner), "1", ex=HEARTBEAT_S)
            return await r.eval(_TAKE_SIGNALS, keys, [prefix])

        cancel, inputs = await self.link.call(run)
        out: dict[str, tuple[bool, dict[str, Any]]] = {}
        for tid in cancel:
            out[bytes(tid).decode()] = (True, {})
        for i in range(0, len(inputs), 2):
            tid = bytes(inputs[i]).decode()
            pairs = inputs[i + 1]
            responses = {bytes(pairs[j]).decode(): msgspec.json.decode(pairs[j + 1]) for j in range(0, len(pairs), 2)}
            out[tid] = (out.get(tid, (False, {}))[0], responses)
        return [(tid, c, r) for tid, (c, r) in out.items()]

    async def live_runners(self) -> list[str]:
        members = await self.link.call(lambda r: r.smembers(self.k("tasks", "runners")))
        return sorted(bytes(m).decode() for m in members)

    async def runner_gone(self, runner: str) -> bool:
        """No heartbeat (a process on any host), or not running (this host)."""
        if runner_alive(runner) is False:
            return True
        return not await self.link.call(lambda r: r.exists([self.k("hb", runner)]))

    async def fail_tasks_of(self, runner: str, message: str, now: float) -> int:
        ids = await self.link.call(lambda r: r.smembers(self.k("tasks", "runner", runner)))
        n = 0
        for raw_id in ids:
            record = await self.load(bytes(raw_id).decode())
            if record is None or record.status in TERMINAL:
                continue
            record.fail(message, now)
            await self._write(record)
            n += 1
        await self.link.call(lambda r: r.srem(self.k("tasks", "runners"), [runner]))
        return n

    async def purge(self, now: float) -> int:
        """Records expire by themselves; this drops expired ids from the indexes."""
        live = self.k("tasks", "live")
        expired = await self.link.call(lambda r: r.zrangebyscore(live, "-inf", now))
        for raw_id in expired:
            tid = bytes(raw_id).decode()
            meta = await self.link.call(lambda r: r.hget(self.k("tasks", "meta"), tid))
            owner, _, runner = (bytes(meta).decode() if meta else "\n").partition("\n")

            async def run(r: Any) -> None:
                async with r.pipeline(transaction=True) as pipe:
                    pipe.zrem(live, [tid])
                    pipe.hdel(self.k("tasks", "meta"), [tid])
                    pipe.srem(self.k("tasks", "owner", owner), [tid])
                    pipe.srem(self.k("tasks", "runner", runner), [tid])

            await self.link.call(run)
        return len(expired)


def _score(record: TaskRecord) -> float:
    t = record.expires_at()
    return time.time() + 10 * 365 * 86400 if math.isinf(t) else t

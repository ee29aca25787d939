"""Handshake-era sessions shared by several processes through Redis (``state = "redis://..."``).

What is shared: each session's record (negotiated version, client info and capabilities, log
level, subscriptions, initialized), with idle expiry; each SSE stream's events, in a Redis
stream per (session, stream), so ``Last-Event-ID`` replays on whichever process the client
reconnects to; and messages between processes on the bus: an event appended to a stream (its
live reader may be elsewhere), a session changed or ended, a client's answer to a server
request that another process sent, a cancellation for a request another process runs.

What stays in each process: the sessions it has seen (a cache, refreshed through the bus),
the requests it runs, the streams it writes or reads. A request answered with plain JSON
touches Redis not at all once its session is cached.
"""

from __future__ import annotations

import time
from typing import Any, AsyncIterator

import msgspec
import msgspec.structs
import trio

from ...server.redis_link import RedisLink, Script
from .session_state import Answered, Appended, Cancelled, Changed, Ended, Event, Reconnected, Remote, SessionRecord

#: what the bus may bring before this process reads it; past that, it reads the streams again
REMOTE_BACKLOG = 4096

# Append an event and tell the bus, in one trip. The stream keeps at most ARGV[1] events and
# ARGV[6] bytes of them (their total in KEYS[3]), the oldest going first; an event bigger than
# that alone gets its id and goes out on the bus, but is not kept. Both keys expire with the session.
_APPEND = """
local size, max_events, max_bytes = #ARGV[2], tonumber(ARGV[1]), tonumber(ARGV[6])
local id = redis.call('XADD', KEYS[1], '*', 'd', ARGV[2], 'f', ARGV[3])
if size > max_bytes then
  redis.call('XDEL', KEYS[1], id)
else
  local total = redis.call('INCRBY', KEYS[3], size)
  while total > max_bytes or redis.call('XLEN', KEYS[1]) > max_events do
    local oldest = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
    if not oldest then
      redis.call('SET', KEYS[3], 0)
      break
    end
    redis.call('XDEL', KEYS[1], oldest[1])
    total = redis.call('DECRBY', KEYS[3], #oldest[2][2])
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[3], ARGV[4])
redis.call('PUBLISH', KEYS[2], string.format(ARGV[5], id))
return id
"""


# A session's record written at initialize: one command (a script, atomic like MULTI/EXEC, one
# reply instead of five; refused as a whole under OOM, READONLY, MISCONF: its first write fails).
# Its removal at DELETE stays a MULTI/EXEC: under OOM Redis refuses a queued transaction, where
# it would run a script of DEL, ZREM and PUBLISH; a refused DELETE keeps the session (issue 22).
_CREATE = Script("""
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 1
""")


def _fields_of(before: SessionRecord, after: SessionRecord) -> tuple[dict[str, Any], list[str]]:
    """The hash fields that differ between two records: (to set, to delete)."""
    changed: dict[str, Any] = {}
    if after.initialized != before.initialized:
        changed["init"] = "1" if after.initialized else "0"
    if after.log_level != before.log_level and after.log_level is not None:
        changed["level"] = after.log_level
    old, new = set(before.subscriptions), set(after.subscriptions)
    changed.update({f"sub:{uri}": "1" for uri in sorted(new - old)})
    return changed, [f"sub:{uri}" for uri in sorted(old - new)]


def apply_changes(record: SessionRecord, changed: dict[str, Any], removed: list[str]) -> SessionRecord:
    """A record with hash-field changes (another process's) applied."""
    subs = set(record.subscriptions) - {f[4:] for f in removed if f.startswith("sub:")}
    subs |= {f[4:] for f in changed if f.startswith("sub:")}
    return msgspec.structs.replace(record, initialized=changed.get("init", "1" if record.initialized else "0") == "1",
                                   log_level=changed.get("level", record.log_level), subscriptions=sorted(subs))


def _record_of(fields: Any) -> SessionRecord | None:
    """A record from its hash (None when the session is gone)."""
    if not fields:
        return None
    text = {bytes(k).decode(): bytes(v) for k, v in fields.items()}
    if "base" not in text:
        return None
    base = msgspec.json.decode(text["base"], type=SessionRecord)
    return msgspec.structs.replace(base, initialized=text.get("init") == b"1",
                                   log_level=text["level"].decode() if "level" in text else None,
                                   subscriptions=sorted(k[4:] for k in text if k.startswith("sub:")))


def pos_key(pos: str) -> tuple[int, int]:
    """Order of Redis stream ids ("1700000000000-3"); "0" is before everything."""
    ms, _, seq = pos.partition("-")
    if not ms.isdigit() or not (seq.isdigit() or seq == "") or len(pos) > 41:
        return (-1, -1)
    key = (int(ms), int(seq or 0))
    return key if key[0] < 2**64 and key[1] < 2**64 else (-1, -1)


class RedisBackend:
    """Sessions shared by every process of a deployment through Redis (see the module text)."""

    def __init__(self, link: RedisLink, ttl_s: float, store_size: int, store_bytes: int) -> None:
        self.link = link
        self.ttl = max(1, int(ttl_s))
        self.store_size = store_size
        self.store_bytes = store_bytes
        self.k = link.key
        self._remote_send, self._remote = trio.open_memory_channel[Remote](REMOTE_BACKLOG)
        self._overflowed = False
        link.on("ev", self._on_event)
        link.on("sess", self._on_session)
        link.on("resp", self._on_response)
        link.on("cancel", self._on_cancel)
        link.resubscribed.append(self._on_reconnect)

    @property
    def ask_prefix(self) -> str:
        return f"{self.link.tag}."

    # -- session records ---------------------------------------------------------------------------
    # A record is a hash: "base" (what initialize fixed), "init", "level", and one "sub:<uri>" per
    # subscription, so two processes changing one session at once each change only their field.
    # The writes of a session's life go through the link's lean client, one round trip each
    # (a bus message included): a session per call must cost little more than a stateless call.
    async def create(self, sid: str, record: SessionRecord) -> None:
        base = msgspec.json.encode(SessionRecord(version=record.version, client_info=record.client_info,
                                                 client_capabilities=record.client_capabilities, owner=record.owner))
        fields = {"base": base, **_fields_of(SessionRecord(version=""), record)[0]}
        await self.link.script(_CREATE, [self.k("sess", sid), self.k("sessions")],
                               [self.ttl, time.time() + self.ttl, sid, *(x for item in fields.items() for x in item)])

    async def update(self, sid: str, before: SessionRecord, after: SessionRecord) -> None:
        """Write what changed between two states of a session, and tell the other processes."""
        changed, removed = _fields_of(before, after)
        if changed or removed:
            await self.link.transaction(*self._writes(sid, changed, removed),
                                        self.link.message("sess", sid=sid, op="changed", set=changed, unset=removed))

    def _writes(self, sid: str, changed: dict[str, Any], removed: list[str]) -> list[tuple[Any, ...]]:
        key = self.k("sess", sid)
        out: list[tuple[Any, ...]] = []
        if changed:
            out.append(("HSET", key, *(x for item in changed.items() for x in item)))
        if removed:
            out.append(("HDEL", key, *removed))
        out.append(("EXPIRE", key, self.ttl))
        out.append(("ZADD", self.k("sessions"), time.time() + self.ttl, sid))
        return out

    async def load(self, sid: str) -> SessionRecord | None:
        (flat,) = await self.link.run(("HGETALL", self.k("sess", sid)))
        return _record_of(dict(zip(flat[::2], flat[1::2])))

    async def touch(self, sid: str) -> bool:
        """Push the idle expiry back; False if the session is gone (expired, deleted)."""
        results = await self.link.transaction(("EXPIRE", self.k("sess", sid), self.ttl),
                                              ("ZADD", self.k("sessions"), time.time() + self.ttl, sid))
        return bool(results[0])

    async def touch_many(self, sids: list[str]) -> list[str]:
        """Push back the idle expiry of sessions in use here, in one round trip; the ones Redis
        no longer has (expired, deleted, or lost when Redis restarted without persistence)."""
        expiry = time.time() + self.ttl
        results = await self.link.run(*(("EXPIRE", self.k("sess", sid), self.ttl) for sid in sids),
                                      ("ZADD", self.k("sessions"), "XX", *(x for sid in sids for x in (expiry, sid))))
        return [sid for sid, kept in zip(sids, results) if not kept]

    async def end(self, sid: str) -> bool:
        results = await self.link.transaction(("DEL", self.k("sess", sid)), ("ZREM", self.k("sessions"), sid),
                                              self.link.message("sess", sid=sid, op="ended"))
        return bool(results[0])

    async def records(self) -> dict[str, SessionRecord]:
        """The records of every live session of the deployment (two round trips)."""
        now = time.time()
        members = await self.link.call(lambda r: r.zrangebyscore(self.k("sessions"), now, "+inf"))
        sids = [bytes(m).decode() for m in members]
        if not sids:
            return {}

        async def run(r: Any) -> Any:
            async with r.pipeline(transaction=False) as pipe:
                for sid in sids:
                    pipe.hgetall(self.k("sess", sid))
            return pipe

        pipe = await self.link.call(run)
        records = {sid: _record_of(fields) for sid, fields in zip(sids, pipe.results)}
        return {sid: rec for sid, rec in records.items() if rec is not None}

    # -- events -------------------------------------------------------------------------------------
    def _append_args(self, sid: str, key: str, data: bytes, final: bool) -> tuple[list[str], list[Any]]:
        note = msgspec.json.encode({"k": "ev", "o": self.link.tag, "sid": sid, "key": key, "pos": "@@",
                                    "final": final, "data": msgspec.Raw(data)})
        template = note.replace(b"%", b"%%").replace(b'"@@"', b'"%s"')
        return ([self.k("ev", sid, key), self.link.channel, self.k("evbytes", sid, key)],
                [self.store_size, data, b"1" if final else b"0", self.ttl, template, self.store_bytes])

    async def append(self, sid: str, key: str, data: bytes, final: bool) -> str:
        keys, args = self._append_args(sid, key, data, final)
        pos = await self.link.call(lambda r: r.eval(_APPEND, keys, args))
        return bytes(pos).decode()

    async def append_many(self, items: list[tuple[str, str, bytes, bool]]) -> list[str]:
        """Several appends in one round trip (change notices to many sessions)."""
        if not items:
            return []

        async def run(r: Any) -> Any:
            async with r.pipeline(transaction=False) as pipe:
                for sid, key, data, final in items:
                    keys, args = self._append_args(sid, key, data, final)
                    pipe.eval(_APPEND, keys, args)
            return pipe

        pipe = await self.link.call(run)
        return [bytes(p).decode() for p in pipe.results]

    async def read(self, sid: str, key: str, after: str) -> list[Event]:
        """The events of a stream after position ``after`` ("0": all kept)."""
        if pos_key(after) == (-1, -1):
            after = "0"  # not a position Redis gave (a client's garbage, a provisional id)
        start = "-" if after == "0" else f"({after}"
        entries = await self.link.call(lambda r: r.xrange(self.k("ev", sid, key), start, "+"))
        out = []
        for entry in entries:
            fields = entry.field_values
            out.append((bytes(entry.identifier).decode(), bytes(fields[b"d"]), fields.get(b"f") == b"1"))
        return out

    async def last(self, sid: str, key: str) -> str:
        """The newest position of a stream ("0" when empty): a new reader starts after it."""
        entries = await self.link.call(lambda r: r.xrevrange(self.k("ev", sid, key), "+", "-", count=1))
        return bytes(entries[0].identifier).decode() if entries else "0"

    def order(self, pos: str) -> tuple[int, int]:
        return pos_key(pos)

    def forget(self, sid: str) -> None:
        return None  # the events live in Redis, expiring with the session

    def written_elsewhere(self, sid: str, key: str) -> bool:
        return True  # another process may be running the request that writes it

    # -- between processes ---------------------------------------------------------------------------
    async def answer_elsewhere(self, sid: str, request_id: Any, result: Any, error: Any) -> None:
        await self.link.publish("resp", sid=sid, response={"id": request_id, "result": result, "error": error})

    async def cancel_elsewhere(self, sid: str, request_id: Any) -> None:
        await self.link.publish("cancel", sid=sid, id=request_id)

    async def remote(self) -> AsyncIterator[Remote]:
        """What the other processes say, in the order the bus brought it; a Reconnected when the
        bus was away or this process fell too far behind (what was lost is read again)."""
        async for item in self._remote:
            if self._overflowed:
                self._overflowed = False
                yield Reconnected()
            yield item

    def _put(self, item: Remote) -> None:
        try:
            self._remote_send.send_nowait(item)
        except trio.WouldBlock:
            self._overflowed = True

    async def _on_reconnect(self) -> None:
        self._put(Reconnected())

    def _on_event(self, m: dict[str, Any]) -> None:
        if m.get("o") == self.link.tag or not isinstance(m.get("pos"), str):
            return  # ours: delivered here already
        data = msgspec.json.encode(m.get("data"))
        self._put(Appended(str(m.get("sid")), str(m.get("key")), (m["pos"], data, bool(m.get("final")))))

    def _on_session(self, m: dict[str, Any]) -> None:
        sid = str(m.get("sid"))
        if m.get("op") == "ended":
            self._put(Ended(sid))
        elif m.get("op") == "changed" and isinstance(m.get("set"), dict) and isinstance(m.get("unset"), list):
            self._put(Changed(sid, m["set"], m["unset"]))

    def _on_response(self, m: dict[str, Any]) -> None:
        response = m.get("response")
        if isinstance(response, dict):
            self._put(Answered(str(m.get("sid")), response.get("id"), response.get("result"), response.get("error")))

    def _on_cancel(self, m: dict[str, Any]) -> None:
        self._put(Cancelled(str(m.get("sid")), m.get("id")))

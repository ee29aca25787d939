"""Ended spans out, for mcpkit's lean tracer (lean_trace.py): dropped (``OTEL_TRACES_EXPORTER=none``),
or queued in a bounded list that a background thread takes in batches and hands to the exporter.

Variables read: ``OTEL_BSP_SCHEDULE_DELAY``, ``OTEL_BSP_MAX_QUEUE_SIZE``,
``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``.
"""

from __future__ import annotations

import collections
import functools
import logging
import os
import threading
import time
import weakref
from typing import Any, Callable

from .lean_trace import LeanSpan, _env_int
from .otlp_export import OtlpHttpSpanExporter, record

log = logging.getLogger("mcpkit.server")


def _forked(ref: "weakref.ref[BatchExport]") -> None:
    """In a forked child: its first span starts a thread of its own (no getpid per span: a
    system call each)."""
    batcher = ref()
    if batcher is not None:
        batcher._started = False


# -- ended spans out ------------------------------------------------------------------------------
class Discard:
    """``OTEL_TRACES_EXPORTER=none``: spans are made (for context and children), never kept."""

    def on_end(self, span: LeanSpan) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def shutdown(self) -> None:
        pass


class BatchExport:
    """Ended spans into a bounded list (``OTEL_BSP_MAX_QUEUE_SIZE``; past it they are dropped,
    counted in ``dropped``, and logged once), exported by a background thread in batches of
    ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` every ``OTEL_BSP_SCHEDULE_DELAY`` ms, or as soon as a
    batch is full. Ending a span costs a list append and a length test; with mcpkit's OTLP
    exporter, a SERVER span as it began is kept as a record of plain values
    (otlp_export.record): the garbage collector stops tracking it at its first pass, and the
    span's objects are freed while it waits (a span object would be tracked and traversed by
    every collection until its batch goes out)."""

    def __init__(self, exporter: Any) -> None:
        self.exporter = exporter
        self.max_queue = _env_int("OTEL_BSP_MAX_QUEUE_SIZE", default=2048) or 2048
        self.batch = min(_env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", default=512) or 512, self.max_queue)
        self.delay = (_env_int("OTEL_BSP_SCHEDULE_DELAY", default=5000) or 5000) / 1000
        self.dropped = 0
        #: what an ended span is kept as (otlp_export.record), when the exporter takes records
        self._record: Callable[[LeanSpan], Any] | None = record if isinstance(exporter, OtlpHttpSpanExporter) else None
        self._queue: collections.deque[Any] = collections.deque()
        self._wake = threading.Event()
        self._flushed = threading.Condition()
        self._flush_asked = 0
        self._flush_done = 0
        self._stop = False
        self._thread: threading.Thread | None = None
        self._pid = 0
        #: a thread runs in this process (False again in a forked child: see _forked)
        self._started = False
        os.register_at_fork(after_in_child=functools.partial(_forked, weakref.ref(self)))

    def on_end(self, span: LeanSpan) -> None:
        if not self._started:  # the first span, or a forked worker: a thread of this process's own
            self._start()
        queue = self._queue
        n = len(queue)
        if n >= self.max_queue:
            self.dropped += 1
            if self.dropped == 1:
                log.warning("traces: the span queue is full (OTEL_BSP_MAX_QUEUE_SIZE=%d): spans are dropped while it is "
                            "(logged once; BatchExport.dropped counts them)", self.max_queue)
            return
        keep = self._record
        queue.append(span if keep is None else keep(span))  # deque.append and popleft are atomic: no lock
        if n + 1 == self.batch:
            self._wake.set()

    def _start(self) -> None:
        self._pid, self._started = os.getpid(), True
        self._queue, self._wake, self._flushed = collections.deque(), threading.Event(), threading.Condition()
        self._flush_asked = self._flush_done = 0
        self._thread = threading.Thread(target=self._run, name="mcpkit-spans", daemon=True)
        self._thread.start()

    def _take(self) -> list[Any]:
        """Up to one batch from the front of the queue (the serving thread only appends)."""
        queue, out = self._queue, []
        pop = queue.popleft
        for _ in range(min(len(queue), self.batch)):
            out.append(pop())
        return out

    def _run(self) -> None:
        """Full batches as they fill; what is left only when the delay passes, at a flush or at
        the end: never a post per few spans (each post costs the serving thread GIL hand-offs)."""
        while True:
            timed_out = not self._wake.wait(self.delay)
            self._wake.clear()
            with self._flushed:
                asked = self._flush_asked
            queue = self._queue
            while len(queue) >= self.batch:
                self._export(self._take())
            if timed_out or asked > self._flush_done or self._stop:
                for _ in range(len(queue) // self.batch + 1):
                    self._export(self._take())
            with self._flushed:
                self._flush_done = asked
                self._flushed.notify_all()
            if self._stop:
                return

    def _export(self, spans: list[Any]) -> None:
        if not spans:
            return
        try:
            self.exporter.export(spans)
        except Exception:  # the exporter logs its own failures; anything else must not stop the thread
            log.exception("exporting %d spans failed", len(spans))

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export what is queued now; wait at most ``timeout_millis``."""
        if self._pid and self._pid != os.getpid():  # a forked process: what is queued is the parent's to export
            self._queue = collections.deque()
            return True
        if self._thread is None or not self._thread.is_alive():
            while self._queue:  # no thread (nothing ended yet, or after shutdown): done here
                self._export(self._take())
            return True
        deadline = time.monotonic() + timeout_millis / 1000
        with self._flushed:
            self._flush_asked += 1
            ticket = self._flush_asked
            self._wake.set()
            while self._flush_done < ticket:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._flushed.wait(left)
        return True

    def shutdown(self) -> None:
        self.force_flush()
        self._stop = True
        self._wake.set()
        self.exporter.shutdown()


__all__ = ["BatchExport", "Discard"]

"""Progress of a tool call on the command line: a bar on a terminal, plain lines otherwise.

Both go to stderr, so stdout carries only the result. The bar is click's; a tool that reports no
total gets a counter instead.
"""

from __future__ import annotations

import sys
from typing import IO, Any

import click

_STEPS = 1000  # the bar's resolution: progress is shown as a share of the total


class ProgressDisplay:
    """The ``progress`` callback of :meth:`Client.call_tool`: ``(progress, total, message)``."""

    def __init__(self, stream: IO[str] | None = None, *, tty: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._bar: Any = None
        self._counter_shown = False

    def __call__(self, progress: Any, total: Any = None, message: Any = None) -> None:
        if not isinstance(progress, (int, float)):
            return
        total = total if isinstance(total, (int, float)) and total > 0 else None
        if total is not None:
            progress = min(progress, total)  # a server's rounding must not show 279.001/279
        text = message if isinstance(message, str) else ""
        if not self.tty:
            shown = f"{_num(progress)}/{_num(total)}" if total is not None else _num(progress)
            click.echo(f"progress: {shown}{'  ' + text if text else ''}", file=self.stream)
            return
        if total is None:
            self._counter(progress, text)
            return
        if self._bar is None:
            self._bar = click.progressbar(length=_STEPS, file=self.stream, show_percent=True, show_pos=False,
                                          show_eta=False, width=30, item_show_func=lambda m: m or "")
            self._bar.__enter__()
        target = min(_STEPS, int(_STEPS * progress / total))
        self._bar.update(max(0, target - self._bar.pos), current_item=text)

    def _counter(self, progress: float, text: str) -> None:
        line = f"\r{_num(progress)} {text}"
        self.stream.write(line[:200].ljust(60))
        self.stream.flush()
        self._counter_shown = True

    def close(self) -> None:
        """End the bar's line before anything else is printed."""
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None
        if self._counter_shown:
            self.stream.write("\n")
            self.stream.flush()
            self._counter_shown = False


def _num(value: float | None) -> str:
    """At most two decimals, never an exponent: 279.0009 -> 279, 0.125 -> 0.12, 1234567.5 -> 1234567.5."""
    if value is None:
        return "?"
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text

"""Bounds on what one spec may cost: how deep it nests, how far its YAML aliases and its
``$ref``s expand, and how large one operation's record (what ``get_operation`` answers) grows.

A spec over a bound is refused (:class:`BoundExceeded`, turned into a one-line error by the
caller); an operation whose schemas do not fit its share is shortened, never refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Real specs nest at most 24 levels (GitHub, Stripe, Box: 21-24); the C YAML loader recurses
# once per level with no limit of its own and crashed at 50,000.
DEFAULT_MAX_NESTING = 100
# The largest operation of eleven public specs is 47 KB (a KubeVirt one, schemas 4 levels deep).
DEFAULT_MAX_OPERATION_BYTES = 64 * 1024
# Kubernetes' 826 operations expand to 3.7 MB, GitHub's 1,223 to 2.1 MB. What is kept takes
# about seven times its JSON size in memory: a spec at the bound costs some 110 MiB.
DEFAULT_MAX_EXPANDED_BYTES = 16 * 1024 * 1024
# Nodes a YAML document may add through aliases (``*name``), each alias counted as the size of
# what it names: a "billion laughs" of nine nested lists is 10^9 of them in a few hundred bytes.
MAX_ALIAS_NODES = 1_000_000

MAX_VALUE_BYTES = 1000  # one kept value (a pattern, a default, an enum member), JSON bytes
MAX_VALUE_DEPTH = 16  # how deep a kept value (an enum member that is an object) may nest
TOO_LARGE = "… (too large to show)"


class BoundExceeded(Exception):
    """A spec over one of the bounds; the message says which, in words a user can act on."""


class OverBudget(Exception):
    """Internal: a schema did not fit what is left of its operation's share."""


@dataclass(frozen=True)
class Limits:
    """The bounds of one catalog (``[plugins.openapi]`` max_nesting, max_operation_kb,
    max_expanded_mb)."""

    max_nesting: int = DEFAULT_MAX_NESTING
    max_operation_bytes: int = DEFAULT_MAX_OPERATION_BYTES
    max_expanded_bytes: int = DEFAULT_MAX_EXPANDED_BYTES

    def cache_tag(self) -> str:
        """What the parsed index depends on besides the spec's bytes (part of the cache key)."""
        return f"n{self.max_nesting}o{self.max_operation_bytes}e{self.max_expanded_bytes}"


class Meter:
    """Approximate JSON bytes of one operation's record, and the work spent building it.

    ``charge`` counts against the operation's share and raises :class:`OverBudget` past it;
    ``charge_soft`` only counts (for parts that are already capped one by one). ``work``
    also keeps what was charged by attempts that were rolled back, so the spec-wide bound
    covers the time spent, not only what was kept.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.work = 0

    @property
    def left(self) -> int:
        return self.limit - self.used

    def charge(self, n: int) -> None:
        self.used += n
        self.work += n
        if self.used > self.limit:
            raise OverBudget

    def charge_soft(self, n: int) -> None:
        self.used += n
        self.work += n


def cut_text(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def value_size(value: Any, limit: int = MAX_VALUE_BYTES) -> int:
    """The approximate JSON size of ``value``, or ``limit + 1`` as soon as it is known to be
    larger or nested deeper than MAX_VALUE_DEPTH. Iterative, and never walks more than about
    ``limit`` items, whatever the value shares or how it nests (YAML aliases may build cycles)."""
    size = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            size += len(item) + 2
        elif isinstance(item, (dict, list, tuple)):
            if depth >= MAX_VALUE_DEPTH:
                return limit + 1
            size += 2
            if isinstance(item, dict):
                for key, sub in item.items():
                    size += len(key) + 3 if isinstance(key, str) else 8
                    stack.append((sub, depth + 1))
                    if size > limit or len(stack) > limit:
                        return limit + 1
            else:
                for sub in item:
                    size += 1
                    stack.append((sub, depth + 1))
                    if size > limit or len(stack) > limit:
                        return limit + 1
        elif isinstance(item, int) and not isinstance(item, bool):
            size += 8 if -(10**15) < item < 10**15 else min(item.bit_length() // 3 + 2, limit + 1)
        else:  # bool, None, float, dates from YAML (written with str())
            size += 8 if item is None or isinstance(item, (bool, float)) else 32
        if size > limit:
            return limit + 1
    return size


def bounded(value: Any, limit: int = MAX_VALUE_BYTES) -> tuple[Any, int]:
    """(value, its size) when it fits ``limit``; a long string is cut with "…" and any other
    value too large to show becomes the string TOO_LARGE."""
    if isinstance(value, str):
        value = cut_text(value, limit)
        return value, len(value) + 2
    size = value_size(value, limit)
    if size > limit:
        return TOO_LARGE, len(TOO_LARGE) + 2
    return value, size

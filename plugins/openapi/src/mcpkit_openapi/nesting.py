"""Checks that run on a spec document before anything recurses over it.

PyYAML's C loader builds its node tree with one C call per nesting level and no limit, so a
100 KB file nested 50,000 levels crashed the process. Its parser, though, is a state machine
that hands out events one at a time without recursing: :func:`check_yaml` reads those events
first, counting how deep the document nests and how many nodes its aliases add, and stops at
the first bound passed, before the loader ever sees the text. JSON's decoder guards its own
recursion; :func:`check_depth` then bounds the decoded object the same way.
"""

from __future__ import annotations

from typing import Any

from .bounds import MAX_ALIAS_NODES, BoundExceeded


def nesting_error(limit: int) -> BoundExceeded:
    return BoundExceeded(f"nests deeper than {limit} levels (the limit is max_nesting = {limit})")


#: the open flow collections libyaml's scanner allows (its default max nest level)
LIBYAML_MAX_NESTING = 1000


def check_yaml(text: str, loader: Any, max_nesting: int, max_alias_nodes: int = MAX_ALIAS_NODES) -> None:
    """Refuse YAML that nests deeper than ``max_nesting``, whose aliases add more than
    ``max_alias_nodes`` nodes, or that has an alias inside the node it names (a cycle, which
    JSON cannot express). Malformed YAML raises the parser's own error."""
    import yaml

    try:
        _walk_yaml(yaml.parse(text, Loader=loader), max_nesting, max_alias_nodes)
    except yaml.YAMLError as exc:
        # libyaml (0.2.5 and later) stops at 1,000 open flow levels while it scans ahead, before
        # the events that would reach our bound arrive: that is the same refusal
        if "maximum nesting depth" in str(exc) and max_nesting <= LIBYAML_MAX_NESTING:
            raise nesting_error(max_nesting) from None
        raise


def _walk_yaml(events: Any, max_nesting: int, max_alias_nodes: int) -> None:
    from yaml.events import (AliasEvent, CollectionEndEvent, CollectionStartEvent, DocumentStartEvent,
                             ScalarEvent)

    stack: list[list[Any]] = []  # one [anchor, expanded node count] per open collection
    sizes: dict[str, int] = {}  # anchor -> expanded node count of the node it names
    open_anchors: dict[str, int] = {}
    aliased = 0
    for event in events:
        if isinstance(event, ScalarEvent):
            if event.anchor:
                sizes[event.anchor] = 1
            if stack:
                stack[-1][1] += 1
        elif isinstance(event, CollectionStartEvent):
            if len(stack) >= max_nesting:
                raise nesting_error(max_nesting)
            if event.anchor:
                open_anchors[event.anchor] = open_anchors.get(event.anchor, 0) + 1
            stack.append([event.anchor, 1])
        elif isinstance(event, CollectionEndEvent):
            anchor, size = stack.pop()
            if anchor:
                sizes[anchor] = size
                open_anchors[anchor] -= 1
            if stack:
                stack[-1][1] += size
        elif isinstance(event, AliasEvent):
            if open_anchors.get(event.anchor):
                raise BoundExceeded(f"has a YAML alias *{_name(event.anchor)} inside the node it names "
                                    "(a cycle, which a JSON document cannot have)")
            size = sizes.get(event.anchor, 1)  # an unknown anchor is the loader's error to report
            aliased += size
            if aliased > max_alias_nodes:
                raise BoundExceeded(f"expands to more than {max_alias_nodes:,} nodes through YAML aliases "
                                    "(*name); the limit keeps alias bombs out")
            if stack:
                stack[-1][1] += size
        elif isinstance(event, DocumentStartEvent):
            sizes.clear()


def check_depth(doc: Any, max_nesting: int) -> None:
    """Refuse a decoded document whose objects and arrays nest deeper than ``max_nesting``
    (the top level is 1). Iterative; each node is visited once (a JSON document shares none)."""
    if not isinstance(doc, (dict, list)):
        return
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list)):
                if depth >= max_nesting:
                    raise nesting_error(max_nesting)
                stack.append((child, depth + 1))


def _name(anchor: str) -> str:
    return anchor if len(anchor) <= 40 else anchor[:39] + "…"

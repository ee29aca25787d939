"""Turn a search request into a compiled matcher, an FTS5 candidate query and a path filter."""

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass

# The regex parser is private but stable since 3.11; it only feeds an optional shortcut
# (a failure means "scan every file"), never the matching itself.
from re import _constants as _sre_constants  # type: ignore[attr-defined]
from re import _parser as _sre_parser  # type: ignore[attr-defined]

MAX_TERM = 500
MAX_TRIGRAMS = 24

class QueryError(ValueError):
    """Bad search input (message meant for the caller)."""


@dataclass(frozen=True)
class Query:
    rx: re.Pattern[str]
    literal: str | None  # substring every matching line contains, for the trigram index
    whole_text: bool  # rx can be run over a whole file and verified per line
    is_regex: bool
    term: str
    case_sensitive: bool


# Constructs that can make a per-line match fail when the pattern runs over the whole text.
_LINE_SENSITIVE = ("(?<", "(?=", "(?!", "\\A", "\\Z", "\\z")


def compile_query(term: str, *, case_sensitive: bool, regex: bool) -> Query:
    if not isinstance(term, str) or not 1 <= len(term) <= MAX_TERM:
        raise QueryError(f"term must be 1-{MAX_TERM} characters long")
    if "\n" in term or "\r" in term:
        raise QueryError("term must be a single line (no newline characters)")
    flags = re.MULTILINE | (0 if case_sensitive else re.IGNORECASE)
    if not regex:
        return Query(re.compile(re.escape(term), flags), term, True, False, term, case_sensitive)
    try:
        rx = re.compile(term, flags)
    except (re.error, OverflowError, RecursionError) as exc:
        raise QueryError(f"invalid regular expression {term!r}: {exc}") from None
    whole = not any(token in term for token in _LINE_SENSITIVE)
    return Query(rx, required_literal(term, flags), whole, True, term, case_sensitive)


def required_literal(pattern: str, flags: int) -> str | None:
    """Longest run of plain characters every match of `pattern` must contain (>= 3 chars)."""
    try:
        parsed = _sre_parser.parse(pattern, flags)
    except Exception:
        return None
    best, run = "", []
    for op, arg in parsed:
        if op is _sre_constants.LITERAL:
            run.append(chr(arg))
            continue
        if len(run) > len(best):
            best = "".join(run)
        run = []
    if len(run) > len(best):
        best = "".join(run)
    if len(best) < 3 or "\n" in best:
        return None
    if not best.isascii() and parsed.state.flags & re.IGNORECASE:
        return None  # SQLite and Python fold non-ASCII case differently
    return best


def fts_expression(literal: str, case_sensitive: bool) -> str | None:
    """An FTS5 query matching every file that contains `literal` (a superset is fine)."""
    if len(literal) < 3:
        return None
    if not case_sensitive and not literal.isascii():
        return None  # the slow path is exact; SQLite's folding may differ from Python's
    seen: dict[str, None] = {}
    for i in range(len(literal) - 2):
        gram = literal[i:i + 3]
        seen.setdefault(gram.lower() if gram.isascii() else gram, None)
    grams = list(seen)
    if len(grams) > MAX_TRIGRAMS:
        step = (len(grams) - 1) / (MAX_TRIGRAMS - 1)
        grams = [grams[round(i * step)] for i in range(MAX_TRIGRAMS)]
    return " AND ".join('"' + g.replace('"', '""') + '"' for g in grams)


_WILDCARDS = re.compile(r"[*?\[]")


def path_matcher(glob: str | None) -> Callable[[str], bool] | None:
    """Filter on paths relative to the project root.

    `*` matches across '/', a pattern without '/' also matches the file name
    alone, and a pattern without wildcards matches that file or directory
    (a bare name also matches files of that name anywhere).
    """
    if glob is None:
        return None
    g = glob.strip()
    while g.startswith("./"):
        g = g[2:]
    if not g or len(g) > 1000:
        raise QueryError("path must be a non-empty glob of at most 1000 characters")
    if not _WILDCARDS.search(g):
        prefix = g.rstrip("/")
        if "/" in prefix or g.endswith("/"):
            return lambda p: p == prefix or p.startswith(prefix + "/")
        return lambda p: (p == prefix or p.startswith(prefix + "/")
                          or p.rpartition("/")[2] == prefix)
    if g.endswith("/"):
        g += "*"
    rx = re.compile(fnmatch.translate(g))
    if "/" in g:
        return lambda p: rx.match(p) is not None
    return lambda p: rx.match(p) is not None or rx.match(p.rpartition("/")[2]) is not None

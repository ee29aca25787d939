"""Search: candidate files from the trigram index, then exact per-line verification.

Lines are split on '\\n' only and counted from 1, exactly like `grep -n`; a
final newline does not start another line. Plain terms are looked for in the
stored UTF-8 bytes (no decoding of files without a match); ignoring case, an
ASCII term folds ASCII letters only. Regexes and non-ASCII terms ignoring case
work on decoded text with Python's Unicode case folding.
"""

import sqlite3
from collections.abc import Iterator
from typing import AnyStr

from .models import SearchHit, SearchResult
from .query import Query, QueryError, compile_query, fts_expression, path_matcher

MAX_LINE = 500  # longer snippet / context lines are cut around the match
CONTEXT_LINES = 2

# (line number, line start, line end, match start) in the units of the searched document
Match = tuple[int, int, int, int]


def _nl(doc: AnyStr) -> AnyStr:
    return b"\n" if isinstance(doc, bytes) else "\n"


def _lines_literal(hay: AnyStr, needle: AnyStr) -> Iterator[Match]:
    """Lines of `hay` containing `needle` (which has no newline)."""
    nl, n = _nl(hay), len(hay)
    pos, line_no, counted = 0, 1, 0
    while True:
        s = hay.find(needle, pos)
        if s < 0:
            return
        line_no += hay.count(nl, counted, s)
        counted = s
        start = hay.rfind(nl, 0, s) + 1
        end = hay.find(nl, s)
        if end < 0:
            end = n
        yield line_no, start, end, s
        pos = end + 1


def _count_literal(hay: AnyStr, needle: AnyStr) -> int:
    """How many lines of `hay` contain `needle` (no line numbers needed)."""
    nl, found, pos = _nl(hay), 0, 0
    while True:
        s = hay.find(needle, pos)
        if s < 0:
            return found
        found += 1
        pos = hay.find(nl, s) + 1
        if pos == 0:
            return found


def _lines_regex(text: str, q: Query) -> Iterator[Match]:
    """Run the regex over the whole text, then confirm each hit on its line alone."""
    rx, n = q.rx, len(text)
    pos, line_no, counted = 0, 1, 0
    while pos <= n:
        m = rx.search(text, pos)
        if m is None:
            return
        s = m.start()
        if s == n and (n == 0 or text[-1] == "\n"):
            return  # the empty "line" after a final newline is not a line
        line_no += text.count("\n", counted, s)
        counted = s
        start = text.rfind("\n", 0, s) + 1
        end = text.find("\n", s)
        if end < 0:
            end = n
        if not q.is_regex:
            yield line_no, start, end, s
        else:  # a regex may have matched across lines
            lm = rx.search(text, start, end)
            if lm is not None:
                yield line_no, start, end, lm.start()
        pos = end + 1


def _lines_each(text: str, q: Query) -> Iterator[Match]:
    """Per-line matching for patterns that look around or anchor to the whole text."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    start = 0
    for number, line in enumerate(lines, 1):
        m = q.rx.search(line)
        if m is not None:
            yield number, start, start + len(line), start + m.start()
        start += len(line) + 1


def _literal_haystack(blob: bytes, q: Query) -> tuple[bytes, bytes] | None:
    """(haystack, needle) for a plain term searchable in the raw bytes, else None."""
    if q.is_regex:
        return None
    if q.case_sensitive:
        return blob, q.term.encode("utf-8")
    if q.term.isascii():  # ASCII terms fold ASCII letters; bytes.lower() keeps offsets
        return blob.lower(), q.term.lower().encode("ascii")
    return None


def count(blob: bytes, q: Query) -> int:
    """Number of matching lines, for documents past the result limit."""
    fast = _literal_haystack(blob, q)
    if fast is not None:
        return _count_literal(*fast)
    return sum(1 for _ in scan(blob, q)[1])


def scan(blob: bytes, q: Query) -> tuple[bytes | str, Iterator[Match]]:
    """The document (bytes or decoded text) and its matching lines."""
    fast = _literal_haystack(blob, q)
    if fast is not None:
        return blob, _lines_literal(*fast)
    text = blob.decode("utf-8", "replace")
    return text, (_lines_regex(text, q) if q.whole_text else _lines_each(text, q))


def _str(part: bytes | str) -> str:
    return part.decode("utf-8", "replace") if isinstance(part, bytes) else part


def _cut(line: str, column: int = 0) -> str:
    line = line[:-1] if line.endswith("\r") else line
    if len(line) <= MAX_LINE:
        return line
    begin = max(0, min(column - MAX_LINE // 5, len(line) - MAX_LINE))
    head = "…" if begin else ""
    tail = "…" if begin + MAX_LINE < len(line) else ""
    return head + line[begin:begin + MAX_LINE] + tail


def _before(doc: AnyStr, start: int, k: int) -> list[str]:
    out: list[str] = []
    nl, end = _nl(doc), start - 1
    while len(out) < k and end >= 0:
        begin = doc.rfind(nl, 0, end) + 1
        out.append(_cut(_str(doc[begin:end])))
        end = begin - 1
    out.reverse()
    return out


def _after(doc: AnyStr, end: int, k: int) -> list[str]:
    out: list[str] = []
    nl, begin, n = _nl(doc), end + 1, len(doc)
    while len(out) < k and begin < n:
        stop = doc.find(nl, begin)
        if stop < 0:
            stop = n
        out.append(_cut(_str(doc[begin:stop])))
        begin = stop + 1
    return out


def _hit(project: str, path: str, doc: bytes | str, m: Match, context: int) -> SearchHit:
    line_no, start, end, s = m
    column = len(_str(doc[start:s]))
    return SearchHit(
        project=project, path=path, line=line_no, column=column + 1,
        snippet=_cut(_str(doc[start:end]), column),
        context_before=_before(doc, start, context),  # type: ignore[type-var]
        context_after=_after(doc, end, context),  # type: ignore[type-var]
    )


def project_names(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM projects ORDER BY name")]


def check_project(conn: sqlite3.Connection, project: str | None) -> None:
    if project is None:
        return
    if conn.execute("SELECT 1 FROM projects WHERE name=?", (project,)).fetchone() is None:
        known = ", ".join(project_names(conn)) or "none yet"
        raise QueryError(f"unknown project {project!r} (indexed projects: {known})")


def search(conn: sqlite3.Connection, term: str, *, project: str | None = None,
           path: str | None = None, limit: int = 20, case_sensitive: bool = False,
           regex: bool = False, context: int = CONTEXT_LINES) -> SearchResult:
    """Find lines containing `term` (or matching it as a Python regex)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 500:
        raise QueryError("limit must be between 1 and 500")
    q = compile_query(term, case_sensitive=case_sensitive, regex=regex)
    keep = path_matcher(path)
    conn.execute("BEGIN")  # one snapshot for the whole search
    try:
        check_project(conn, project)
        sql = ("SELECT f.id, p.name, f.path FROM files f JOIN projects p ON p.id=f.project_id "
               "WHERE f.live=1 AND f.skipped IS NULL")
        args: list[object] = []
        if project is not None:
            sql += " AND p.name=?"
            args.append(project)
        match = fts_expression(q.literal, case_sensitive) if q.literal else None
        if match is not None:
            sql += " AND f.id IN (SELECT rowid FROM content WHERE content MATCH ?)"
            args.append(match)
        candidates = conn.execute(sql, args).fetchall()
        if keep is not None:
            candidates = [c for c in candidates if keep(c[2])]
        candidates.sort(key=lambda c: (c[1], c[2]))
        results: list[SearchHit] = []
        total = 0
        for fid, proj, rel in candidates:
            row = conn.execute("SELECT CAST(text AS BLOB) FROM content WHERE rowid=?",
                               (fid,)).fetchone()
            if row is None:
                continue
            if len(results) >= limit:
                total += count(row[0], q)
                continue
            doc, lines = scan(row[0], q)
            for m in lines:
                total += 1
                if len(results) < limit:
                    results.append(_hit(proj, rel, doc, m, context))
    finally:
        conn.execute("COMMIT")
    return SearchResult(results=results, total=total, truncated=total > len(results))
